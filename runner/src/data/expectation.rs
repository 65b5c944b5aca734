//! What a block must hold when read back ([`Expectation`]), and what a deallocated block
//! held before ([`Previous`]): the vocabulary the host map ([`super::map`]) records and
//! the judgement ([`super::judge`]) checks reads against.

/// What a block must hold, as the host map records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Expectation {
    /// nvtest wrote the block with this generation and seed: it must match exactly.
    Written { generation: u64, seed: u64 },
    /// The subject of a Dataset Management deallocate: it reads as DLFEAT says, or as
    /// `previous`, the last data written, if the controller did not deallocate it. When
    /// what the block held before is not known (`None`), anything is accepted: a
    /// controller that kept the block returns data nvtest never saw.
    Deallocated { previous: Option<Previous> },
    /// Written by Write Zeroes (with or without DEAC): all zeros. Write Zeroes is not
    /// advisory: the blocks read as zeroes whether or not they were deallocated.
    Zeroes,
    /// Holds no user data from before a known point: a namespace just created (its blocks
    /// were never written) or just formatted (NVMe 1.4 §5.23: after a successful Format
    /// NVM the controller shall not return any user data the namespace held). No block of
    /// nvtest's (of any namespace, LBA or generation) may be read there; with `dlfeat`
    /// (never written: a deallocated or unwritten logical block, §6.7.1.1) the block also
    /// reads as DLFEAT reports, when it reports a value.
    Erased { dlfeat: bool },
    /// Nothing known: any content is accepted.
    Unknown,
}

/// What a deallocated block held before the deallocate: what it still reads as if the
/// controller took no action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Previous {
    /// nvtest's data of this generation and seed.
    Written { generation: u64, seed: u64 },
    /// Zeros written by Write Zeroes.
    Zeroes,
}

impl Expectation {
    /// What a block holding `self` must hold after a Dataset Management deallocate: the
    /// DLFEAT pattern, or what it held (a block deallocated again keeps the data it held
    /// before the first deallocate: deallocating writes nothing).
    pub fn deallocated(self) -> Expectation {
        let previous = match self {
            Expectation::Written { generation, seed } => Some(Previous::Written { generation, seed }),
            Expectation::Zeroes => Some(Previous::Zeroes),
            Expectation::Deallocated { previous } => previous,
            // Deallocating writes nothing: the block still holds no earlier user data.
            erased @ Expectation::Erased { .. } => return erased,
            Expectation::Unknown => None,
        };
        Expectation::Deallocated { previous }
    }
}
