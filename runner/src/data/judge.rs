//! Judging blocks read back: exact comparison against what the host map says each block
//! must hold, and on a mismatch a diagnosis of what the block holds instead.
//!
//! The fast path compares without allocating; only the first wrong block of a judged range
//! is diagnosed (the rest are counted), so a badly broken drive costs no more than a good one.

use super::block::{follows_keystream, read_header, BlockSize, BlockTag, HeaderRead, LayoutError, Stamp};
use super::map::HostMap;
use super::wide::with_wide_vectors;

/// What a block must hold, as the host map records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Expectation {
    /// nvtest wrote the block with this generation and seed: it must match exactly.
    Written { generation: u64, seed: u64 },
    /// Deallocated (Dataset Management, or Write Zeroes with DEAC): read as DLFEAT says.
    Deallocated,
    /// Written by Write Zeroes without deallocation: all zeros.
    Zeroes,
    /// Nothing known: any content is accepted.
    Unknown,
}

/// What a read of a deallocated block returns: DLFEAT bits 2:0 of Identify Namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeallocatedRead {
    /// Not reported: any data is accepted (the read merely has to succeed).
    NotReported,
    /// All bytes 0x00.
    Zeroes,
    /// All bytes 0xFF.
    Ones,
}

impl DeallocatedRead {
    /// From Identify Namespace DLFEAT (byte 33); the reserved values mean "not reported".
    pub fn from_dlfeat(dlfeat: u8) -> Self {
        match dlfeat & 0b111 {
            0b001 => DeallocatedRead::Zeroes,
            0b010 => DeallocatedRead::Ones,
            _ => DeallocatedRead::NotReported,
        }
    }
}

/// What a wrong block holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// Every byte 0x00.
    Zeroes,
    /// Every byte 0xFF.
    Ones,
    /// A complete, valid nvtest block: this tag's.
    Block(BlockTag),
    /// A valid header of a block of another size (its tag names that size): data from
    /// before a format changed the LBA size.
    OtherSize(BlockTag),
    /// A valid header whose block departs from its own pattern at byte `from`.
    Torn { header: BlockTag, from: usize, rest: Rest },
    /// nvtest's magic with a header that fails its checksum or has a bad field.
    CorruptHeader,
    /// Nothing nvtest recognises.
    Unrecognisable,
}

/// What the rest of a torn block holds, from where it departs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rest {
    Zeroes,
    Ones,
    /// The data that was expected there (the header is the stale or foreign part).
    Expected,
    /// The body of some other nvtest block (to the end of that 4 KiB chunk).
    OtherBlock,
    Unrecognisable,
}

/// A block that does not hold what it must: the drive's failure, with the evidence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// Where the block was read.
    pub nsid: u32,
    pub lba: u64,
    pub block_size: BlockSize,
    /// What the host map says the block must hold, and how deallocated blocks read.
    pub expected: Expectation,
    pub dealloc: DeallocatedRead,
    pub found: Found,
    /// The first and last byte offset (inclusive) in the block that differ from what is expected.
    pub first_difference: usize,
    pub last_difference: usize,
    /// Wrong blocks in the judged range (this one is the first) and blocks judged.
    pub wrong_blocks: u64,
    pub blocks_judged: u64,
}

/// Why data could not be accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JudgeError {
    /// The buffer or block size was unusable: nvtest's mistake, says nothing about the drive.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The drive returned wrong data.
    #[error(transparent)]
    Mismatch(Box<Mismatch>),
}

/// Judges one block read from `lba` of `nsid` (the block size is the buffer's length).
pub fn judge_block(
    block: &[u8],
    nsid: u32,
    lba: u64,
    expected: Expectation,
    dealloc: DeallocatedRead,
) -> Result<(), JudgeError> {
    let block_size = BlockSize::of_len(block.len())?;
    let mut tally = Tally::default();
    judge_run(block, nsid, lba, block_size, expected, dealloc, &mut tally);
    tally.finish(1)
}

/// Judges `buf`, read from `first_lba` of `nsid` onwards, against what `map` says each
/// block must hold; blocks the map does not know are accepted.
pub fn judge_range(
    buf: &[u8],
    nsid: u32,
    first_lba: u64,
    block_size: BlockSize,
    map: &HostMap,
    dealloc: DeallocatedRead,
) -> Result<(), JudgeError> {
    let blocks = block_size.blocks_in(buf.len())?;
    if blocks > 0 && first_lba.checked_add(blocks - 1).is_none() {
        return Err(LayoutError::LbaOverflow { first_lba, blocks }.into());
    }
    let Some(namespace) = map.namespace(nsid) else {
        return Ok(());
    };
    let mut tally = Tally::default();
    let mut rest = buf;
    for segment in namespace.segments(first_lba, blocks) {
        // Segments tile the range, so the split always succeeds; stop rather than panic.
        let run_len = (segment.count as usize).saturating_mul(block_size.bytes());
        let Some((run, after)) = rest.split_at_checked(run_len) else {
            break;
        };
        judge_run(run, nsid, segment.first, block_size, segment.state, dealloc, &mut tally);
        rest = after;
    }
    tally.finish(blocks)
}

/// The first wrong block seen (diagnosed) and how many were wrong.
#[derive(Default)]
struct Tally {
    first: Option<Mismatch>,
    wrong: u64,
}

impl Tally {
    fn wrong(&mut self, diagnose: impl FnOnce() -> Mismatch) {
        if self.first.is_none() {
            self.first = Some(diagnose());
        }
        self.wrong += 1;
    }

    fn finish(self, blocks_judged: u64) -> Result<(), JudgeError> {
        match self.first {
            None => Ok(()),
            Some(first) => {
                Err(JudgeError::Mismatch(Box::new(Mismatch { wrong_blocks: self.wrong, blocks_judged, ..first })))
            }
        }
    }
}

/// The content a block must have, resolved from the map's expectation and DLFEAT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Content {
    Block(BlockTag),
    Zeroes,
    Ones,
    Anything,
}

fn content(nsid: u32, lba: u64, block_size: BlockSize, expected: Expectation, dealloc: DeallocatedRead) -> Content {
    match (expected, dealloc) {
        (Expectation::Written { generation, seed }, _) => {
            Content::Block(BlockTag { nsid, lba, generation, seed, block_size })
        }
        (Expectation::Zeroes, _) | (Expectation::Deallocated, DeallocatedRead::Zeroes) => Content::Zeroes,
        (Expectation::Deallocated, DeallocatedRead::Ones) => Content::Ones,
        (Expectation::Deallocated, DeallocatedRead::NotReported) | (Expectation::Unknown, _) => Content::Anything,
    }
}

/// Judges consecutive blocks that share one expectation.
fn judge_run(
    run: &[u8],
    nsid: u32,
    first_lba: u64,
    block_size: BlockSize,
    expected: Expectation,
    dealloc: DeallocatedRead,
    tally: &mut Tally,
) {
    let diagnose = |block: &[u8], lba: u64| diagnose(block, nsid, lba, block_size, expected, dealloc);
    let block_bytes = block_size.bytes();
    /// What every block of the run must be.
    enum Want {
        Block(Stamp),
        Every(u8),
    }
    let want = match content(nsid, first_lba, block_size, expected, dealloc) {
        Content::Block(tag) => Want::Block(Stamp::new(&tag)),
        Content::Zeroes => Want::Every(0x00),
        Content::Ones => Want::Every(0xff),
        Content::Anything => return,
    };
    // The index of the next wrong block in what is left of the run.
    let next_wrong = |rest: &[u8], lba: u64| match &want {
        Want::Block(stamp) => stamp.first_wrong(rest, lba),
        Want::Every(byte) => first_unfilled(rest, block_bytes, *byte),
    };
    // The callers checked that the run's LBAs do not pass u64::MAX; wrapping adds cannot panic.
    let mut next = 0usize;
    while let Some(rest) = run.get(next * block_bytes..) {
        let Some(index) = next_wrong(rest, first_lba.wrapping_add(next as u64)) else { break };
        let wrong = next + index;
        let block = run.get(wrong * block_bytes..(wrong + 1) * block_bytes).unwrap_or_default();
        tally.wrong(|| diagnose(block, first_lba.wrapping_add(wrong as u64)));
        next = wrong + 1;
    }
}

/// The index of the first block of `run` that is not all `byte`.
fn first_unfilled(run: &[u8], block_bytes: usize, byte: u8) -> Option<usize> {
    let pattern = u64::from_ne_bytes([byte; 8]);
    with_wide_vectors(
        #[inline(always)]
        || {
            run.chunks(block_bytes).position(|block| {
                let (words, tail) = block.as_chunks::<8>();
                let differ = words.iter().fold(0, |acc, word| acc | (u64::from_ne_bytes(*word) ^ pattern));
                differ != 0 || tail.iter().any(|&b| b != byte)
            })
        },
    )
}

fn all_zeroes(block: &[u8]) -> bool {
    block.iter().all(|&b| b == 0)
}

fn all_ones(block: &[u8]) -> bool {
    block.iter().all(|&b| b == 0xff)
}

/// Describes a wrong block: what it holds and where it differs from what it must hold.
fn diagnose(
    block: &[u8],
    nsid: u32,
    lba: u64,
    block_size: BlockSize,
    expected: Expectation,
    dealloc: DeallocatedRead,
) -> Mismatch {
    let content = content(nsid, lba, block_size, expected, dealloc);
    let expected_bytes = match content {
        Content::Block(tag) => Stamp::new(&tag).block(lba),
        Content::Zeroes => vec![0; block.len()],
        Content::Ones => vec![0xff; block.len()],
        Content::Anything => block.to_vec(),
    };
    let differs = |(a, b): (&u8, &u8)| a != b;
    let first_difference = block.iter().zip(&expected_bytes).position(differs).unwrap_or(0);
    let last_difference = block.iter().zip(&expected_bytes).rposition(differs).unwrap_or(0);
    Mismatch {
        nsid,
        lba,
        block_size,
        expected,
        dealloc,
        found: classify(block, &expected_bytes),
        first_difference,
        last_difference,
        wrong_blocks: 1,
        blocks_judged: 1,
    }
}

/// What `block` holds; `expected` is what it should hold (to recognise a torn block whose
/// stale part is at the front).
fn classify(block: &[u8], expected: &[u8]) -> Found {
    if all_zeroes(block) {
        return Found::Zeroes;
    }
    if all_ones(block) {
        return Found::Ones;
    }
    match read_header(block) {
        HeaderRead::Valid(tag) => {
            let own = Stamp::new(&tag).block(tag.lba);
            match block.iter().zip(&own).position(|(a, b)| a != b) {
                None => Found::Block(tag),
                Some(from) => Found::Torn { header: tag, from, rest: classify_rest(block, from, expected) },
            }
        }
        HeaderRead::OtherSize(tag) => Found::OtherSize(tag),
        HeaderRead::Corrupt => Found::CorruptHeader,
        HeaderRead::NoMagic => Found::Unrecognisable,
    }
}

fn classify_rest(block: &[u8], from: usize, expected: &[u8]) -> Rest {
    let rest = block.get(from..).unwrap_or_default();
    if rest.iter().all(|&b| b == 0) {
        Rest::Zeroes
    } else if rest.iter().all(|&b| b == 0xff) {
        Rest::Ones
    } else if Some(rest) == expected.get(from..) {
        Rest::Expected
    } else if follows_keystream(block, from) {
        Rest::OtherBlock
    } else {
        Rest::Unrecognisable
    }
}

impl std::error::Error for Mismatch {}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = format!("LBA {:#x} of nsid {}", self.lba, self.nsid);
        match content(self.nsid, self.lba, self.block_size, self.expected, self.dealloc) {
            Content::Block(expected) => self.fmt_against_block(f, &at, &expected)?,
            Content::Zeroes => self.fmt_against_fill(f, &at, "all zeros")?,
            Content::Ones => self.fmt_against_fill(f, &at, "all 0xFF bytes")?,
            Content::Anything => write!(f, "{at} was judged although anything may be read there")?,
        }
        write!(
            f,
            " (bytes {:#x}..={:#x} of the {} block differ",
            self.first_difference, self.last_difference, self.block_size
        )?;
        if self.wrong_blocks > 1 {
            write!(f, "; the first of {} wrong blocks among {} read", self.wrong_blocks, self.blocks_judged)?;
        }
        write!(f, ")")
    }
}

impl Mismatch {
    /// "nsid 1's LBA 0x1f3 (generation 3)", "LBA 0x1f4 (generation 3)" or "generation 2",
    /// whichever says how `tag` differs from the block read here.
    fn whose(&self, tag: &BlockTag) -> String {
        if tag.nsid != self.nsid {
            format!("nsid {}'s LBA {:#x} (generation {})", tag.nsid, tag.lba, tag.generation)
        } else if tag.lba != self.lba {
            format!("LBA {:#x} (generation {})", tag.lba, tag.generation)
        } else {
            format!("generation {}", tag.generation)
        }
    }

    fn rest(&self, rest: Rest, expected: Option<&BlockTag>) -> String {
        match (rest, expected) {
            (Rest::Zeroes, _) => "zeros".to_string(),
            (Rest::Ones, _) => "0xFF bytes".to_string(),
            (Rest::Expected, Some(tag)) => format!("the data of generation {} that was written", tag.generation),
            (Rest::Expected, None) => "the expected data".to_string(),
            (Rest::OtherBlock, _) => "another nvtest block's data".to_string(),
            (Rest::Unrecognisable, _) => "unrecognisable data".to_string(),
        }
    }

    fn fmt_against_block(&self, f: &mut std::fmt::Formatter<'_>, at: &str, expected: &BlockTag) -> std::fmt::Result {
        let generation = expected.generation;
        match self.found {
            Found::Block(tag) if tag.nsid != expected.nsid => {
                write!(f, "{at} holds {}: data from another namespace", self.whose(&tag))
            }
            Found::Block(tag) if tag.lba != expected.lba => {
                write!(f, "{at} holds {}: a misdirected write or read", self.whose(&tag))
            }
            Found::Block(tag) if tag.seed != expected.seed => write!(
                f,
                "{at} holds generation {} written with seed {:#x}, not {:#x}: stale data from another run",
                tag.generation, tag.seed, expected.seed
            ),
            Found::Block(tag) if tag.generation < generation => write!(
                f,
                "{at} holds generation {} where generation {generation} was written: stale data (a lost write)",
                tag.generation
            ),
            Found::Block(tag) => write!(
                f,
                "{at} holds generation {} where generation {generation} was last recorded: \
                 a write nvtest did not see complete took effect",
                tag.generation
            ),
            Found::OtherSize(tag) if tag.nsid != self.nsid => write!(
                f,
                "{at} holds the start of a {} block ({}) where generation {generation} was written: \
                 data from another namespace",
                tag.block_size,
                self.whose(&tag),
            ),
            Found::OtherSize(tag) => write!(
                f,
                "{at} holds the start of a {} block ({}) where generation {generation} was written: \
                 data from before a format to {} blocks",
                tag.block_size,
                self.whose(&tag),
                self.block_size
            ),
            Found::Zeroes => write!(
                f,
                "{at} reads all zeros where generation {generation} was written: \
                 the write was lost or the block deallocated"
            ),
            Found::Ones => write!(
                f,
                "{at} reads all 0xFF bytes where generation {generation} was written: \
                 the write was lost or the block deallocated"
            ),
            Found::Torn { header, from, rest } => {
                let head = if header == *expected { format!("generation {generation}") } else { self.whose(&header) };
                write!(
                    f,
                    "{at} holds a torn block: {head}'s data up to byte {from:#x}, then {}",
                    self.rest(rest, Some(expected))
                )
            }
            Found::CorruptHeader => write!(
                f,
                "{at} holds an nvtest header that fails its checksum where generation {generation} was written: \
                 corrupted data"
            ),
            Found::Unrecognisable => {
                write!(f, "{at} holds unrecognisable data where generation {generation} was written")
            }
        }
    }

    fn fmt_against_fill(&self, f: &mut std::fmt::Formatter<'_>, at: &str, fill: &str) -> std::fmt::Result {
        let must = match self.expected {
            Expectation::Zeroes => format!("it must read {fill} after Write Zeroes"),
            _ => format!("it must read {fill} once deallocated (DLFEAT)"),
        };
        match self.found {
            Found::Block(tag) if tag.nsid == self.nsid && tag.lba == self.lba => {
                write!(f, "{at} still holds generation {} but {must}: stale data", tag.generation)
            }
            Found::Block(tag) => write!(f, "{at} holds {} but {must}", self.whose(&tag)),
            Found::OtherSize(tag) => {
                write!(f, "{at} holds the start of a {} block ({}) but {must}", tag.block_size, self.whose(&tag))
            }
            Found::Zeroes => write!(f, "{at} reads all zeros but {must}"),
            Found::Ones => write!(f, "{at} reads all 0xFF bytes but {must}"),
            Found::Torn { header, from, rest } => write!(
                f,
                "{at} holds {}'s data up to byte {from:#x}, then {}, but {must}",
                self.whose(&header),
                self.rest(rest, None)
            ),
            Found::CorruptHeader => write!(f, "{at} holds an nvtest header that fails its checksum but {must}"),
            Found::Unrecognisable => write!(f, "{at} holds unrecognisable data but {must}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::block::{fill_block, fill_blocks};
    use super::*;

    const WRITTEN: Expectation = Expectation::Written { generation: 3, seed: 7 };

    fn size(bytes: u32) -> BlockSize {
        BlockSize::new(bytes).expect("valid block size")
    }

    fn written(nsid: u32, lba: u64, generation: u64, bytes: u32) -> Vec<u8> {
        let mut block = vec![0u8; bytes as usize];
        let tag = BlockTag { nsid, lba, generation, seed: 7, block_size: size(bytes) };
        fill_block(&mut block, &tag).expect("one block");
        block
    }

    fn mismatch(result: Result<(), JudgeError>) -> Mismatch {
        match result {
            Err(JudgeError::Mismatch(mismatch)) => *mismatch,
            other => panic!("expected a mismatch, got {other:?}"),
        }
    }

    #[test]
    fn the_block_written_is_accepted() {
        let block = written(2, 0x1f3, 3, 4096);
        assert_eq!(judge_block(&block, 2, 0x1f3, WRITTEN, DeallocatedRead::NotReported), Ok(()));
    }

    #[test]
    fn another_namespace_s_block_is_named() {
        let block = written(1, 0x1f3, 3, 512);
        let m = mismatch(judge_block(&block, 2, 0x1f3, WRITTEN, DeallocatedRead::NotReported));
        assert_eq!(
            m.found,
            Found::Block(BlockTag { nsid: 1, lba: 0x1f3, generation: 3, seed: 7, block_size: size(512) })
        );
        assert_eq!(m.first_difference, 8);
        assert!(
            m.to_string().starts_with(
                "LBA 0x1f3 of nsid 2 holds nsid 1's LBA 0x1f3 (generation 3): data from another namespace"
            ),
            "{m}"
        );
    }

    #[test]
    fn another_lba_s_block_is_a_misdirected_write() {
        let block = written(2, 0x1f4, 3, 512);
        let m = mismatch(judge_block(&block, 2, 0x1f3, WRITTEN, DeallocatedRead::NotReported));
        assert!(m.to_string().starts_with("LBA 0x1f3 of nsid 2 holds LBA 0x1f4 (generation 3): a misdirected"), "{m}");
    }

    #[test]
    fn an_older_generation_is_stale_data() {
        let block = written(2, 0x1f3, 2, 512);
        let m = mismatch(judge_block(&block, 2, 0x1f3, WRITTEN, DeallocatedRead::NotReported));
        assert!(m.to_string().contains("holds generation 2 where generation 3 was written: stale data"), "{m}");
    }

    #[test]
    fn another_run_s_seed_is_stale_data() {
        let block = written(2, 0x1f3, 3, 512);
        let other_seed = Expectation::Written { generation: 3, seed: 8 };
        let m = mismatch(judge_block(&block, 2, 0x1f3, other_seed, DeallocatedRead::NotReported));
        assert!(m.to_string().contains("written with seed 0x7, not 0x8: stale data from another run"), "{m}");
    }

    #[test]
    fn zeros_where_data_was_written_are_a_lost_write() {
        let m = mismatch(judge_block(&[0u8; 512], 2, 0x1f3, WRITTEN, DeallocatedRead::NotReported));
        assert_eq!(m.found, Found::Zeroes);
        assert_eq!((m.first_difference, m.last_difference), (0, 511));
        assert!(m.to_string().contains("reads all zeros where generation 3 was written"), "{m}");
    }

    #[test]
    fn a_block_torn_at_a_sector_boundary_says_where() {
        let mut block = written(2, 0x1f3, 3, 4096);
        block[1024..].fill(0);
        let m = mismatch(judge_block(&block, 2, 0x1f3, WRITTEN, DeallocatedRead::NotReported));
        assert_eq!(m.found, Found::Torn { header: tag_of(&block), from: 1024, rest: Rest::Zeroes });
        assert!(m.to_string().contains("a torn block: generation 3's data up to byte 0x400, then zeros"), "{m}");
    }

    #[test]
    fn a_stale_first_sector_before_new_data_is_torn_with_the_expected_rest() {
        let mut block = written(2, 0x1f3, 3, 4096);
        block[..512].copy_from_slice(&written(2, 0x1f3, 2, 4096)[..512]);
        let m = mismatch(judge_block(&block, 2, 0x1f3, WRITTEN, DeallocatedRead::NotReported));
        assert!(matches!(m.found, Found::Torn { from: 512, rest: Rest::Expected, .. }), "{:?}", m.found);
        assert!(
            m.to_string()
                .contains("generation 2's data up to byte 0x200, then the data of generation 3 that was written"),
            "{m}"
        );
    }

    #[test]
    fn the_tail_of_another_block_is_recognised() {
        let mut block = written(2, 0x1f3, 3, 4096);
        block[2048..].copy_from_slice(&written(5, 9, 1, 4096)[2048..]);
        let m = mismatch(judge_block(&block, 2, 0x1f3, WRITTEN, DeallocatedRead::NotReported));
        assert!(matches!(m.found, Found::Torn { from: 2048, rest: Rest::OtherBlock, .. }), "{:?}", m.found);
    }

    #[test]
    fn a_flipped_header_bit_is_a_corrupt_header() {
        let mut block = written(2, 0x1f3, 3, 512);
        block[17] ^= 0x10;
        let m = mismatch(judge_block(&block, 2, 0x1f3, WRITTEN, DeallocatedRead::NotReported));
        assert_eq!(m.found, Found::CorruptHeader);
        assert_eq!((m.first_difference, m.last_difference), (17, 17));
    }

    #[test]
    fn a_block_from_before_a_format_is_recognised_by_its_size() {
        let block = written(2, 0x1f3, 3, 4096);
        let m = mismatch(judge_block(&block[..512], 2, 0x1f3, WRITTEN, DeallocatedRead::NotReported));
        assert!(matches!(m.found, Found::OtherSize(tag) if tag.block_size == size(4096)), "{:?}", m.found);
        assert!(m.to_string().contains("the start of a 4096-byte block"), "{m}");
    }

    #[test]
    fn deallocated_blocks_read_as_dlfeat_says() {
        let zeros = [0u8; 512];
        let ones = [0xffu8; 512];
        let data = written(2, 0x10, 3, 512);
        let judge = |block: &[u8], dealloc| judge_block(block, 2, 0x10, Expectation::Deallocated, dealloc);
        assert_eq!(judge(&zeros, DeallocatedRead::Zeroes), Ok(()));
        assert_eq!(judge(&ones, DeallocatedRead::Ones), Ok(()));
        for block in [&zeros[..], &ones[..], &data[..]] {
            assert_eq!(judge(block, DeallocatedRead::NotReported), Ok(()));
        }
        let m = mismatch(judge(&data, DeallocatedRead::Zeroes));
        assert!(
            m.to_string().starts_with(
                "LBA 0x10 of nsid 2 still holds generation 3 but it must read all zeros once deallocated (DLFEAT): stale data"
            ),
            "{m}"
        );
        let m = mismatch(judge(&zeros, DeallocatedRead::Ones));
        assert!(m.to_string().contains("reads all zeros but it must read all 0xFF bytes"), "{m}");
    }

    #[test]
    fn write_zeroes_must_read_zeros_whatever_dlfeat_says() {
        let data = written(2, 0x10, 3, 512);
        let m = mismatch(judge_block(&data, 2, 0x10, Expectation::Zeroes, DeallocatedRead::NotReported));
        assert!(m.to_string().contains("must read all zeros after Write Zeroes"), "{m}");
        assert_eq!(judge_block(&[0u8; 512], 2, 0x10, Expectation::Zeroes, DeallocatedRead::Ones), Ok(()));
    }

    #[test]
    fn unknown_blocks_accept_anything() {
        assert_eq!(judge_block(&[0x5a; 512], 1, 0, Expectation::Unknown, DeallocatedRead::Zeroes), Ok(()));
    }

    #[test]
    fn a_buffer_that_is_no_block_is_nvtest_s_error() {
        let result = judge_block(&[0u8; 100], 1, 0, WRITTEN, DeallocatedRead::Zeroes);
        assert_eq!(result, Err(JudgeError::Layout(LayoutError::BlockSize(100))));
    }

    #[test]
    fn a_range_is_judged_against_the_map_and_counts_every_wrong_block() {
        let mut map = HostMap::new();
        map.record_write(2, 100, 8, 3, 7);
        map.record_deallocate(2, 104, 2);
        let mut buf = vec![0u8; 10 * 512];
        let first = BlockTag { nsid: 2, lba: 100, generation: 3, seed: 7, block_size: size(512) };
        fill_blocks(&mut buf, &first).expect("ten blocks");
        // LBAs 104 and 105 are deallocated and still hold data; 108 and 109 are unknown.
        let m = mismatch(judge_range(&buf, 2, 100, size(512), &map, DeallocatedRead::Zeroes));
        assert_eq!((m.lba, m.wrong_blocks, m.blocks_judged), (104, 2, 10));
        assert!(m.to_string().ends_with("; the first of 2 wrong blocks among 10 read)"), "{m}");
        assert_eq!(judge_range(&buf, 2, 100, size(512), &map, DeallocatedRead::NotReported), Ok(()));
        buf[104 * 512 - 100 * 512..106 * 512 - 100 * 512].fill(0);
        assert_eq!(judge_range(&buf, 2, 100, size(512), &map, DeallocatedRead::Zeroes), Ok(()));
    }

    #[test]
    fn a_range_of_a_namespace_the_map_does_not_know_is_accepted() {
        let map = HostMap::new();
        assert_eq!(judge_range(&[1u8; 1024], 9, 0, size(512), &map, DeallocatedRead::Zeroes), Ok(()));
    }

    #[test]
    fn a_range_past_the_last_lba_is_nvtest_s_error() {
        let map = HostMap::new();
        let result = judge_range(&[0u8; 1024], 1, u64::MAX, size(512), &map, DeallocatedRead::Zeroes);
        assert_eq!(result, Err(JudgeError::Layout(LayoutError::LbaOverflow { first_lba: u64::MAX, blocks: 2 })));
    }

    #[test]
    fn dlfeat_read_behaviour_is_bits_2_to_0() {
        assert_eq!(DeallocatedRead::from_dlfeat(0b1001), DeallocatedRead::Zeroes);
        assert_eq!(DeallocatedRead::from_dlfeat(0b0010), DeallocatedRead::Ones);
        assert_eq!(DeallocatedRead::from_dlfeat(0b0000), DeallocatedRead::NotReported);
        assert_eq!(DeallocatedRead::from_dlfeat(0b0011), DeallocatedRead::NotReported);
    }

    fn tag_of(block: &[u8]) -> BlockTag {
        super::super::block::decode_header(block).expect("a valid header")
    }
}
