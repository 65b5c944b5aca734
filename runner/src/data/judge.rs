//! Judging blocks read back: exact comparison against what the host map says each block
//! must hold, and on a mismatch a diagnosis of what the block holds instead.
//!
//! The fast path compares without allocating; only the first wrong block of a judged range
//! is diagnosed (the rest are counted), so a badly broken drive costs no more than a good one.
//!
//! A block that was the subject of a Dataset Management deallocate may hold one of two
//! things: deallocation is advisory (NVMe 1.4 Dataset Management command: "a compliant
//! controller may choose to take no action"; Attribute – Deallocate: the NVM subsystem
//! *may* deallocate the ranges), so the block reads as DLFEAT says a deallocated block
//! reads, or — where the controller kept it — as the last data written there. Either is
//! accepted; blocks that kept their data are counted ([`Judged::kept`]) so that a case can
//! say so.

use super::block::{follows_keystream, read_header, BlockSize, BlockTag, HeaderRead, LayoutError, Stamp};
use super::expectation::{Expectation, Previous};
use super::map::HostMap;
use super::wide::with_wide_vectors;

/// What a read of a deallocated block returns: DLFEAT bits 2:0 of Identify Namespace, as
/// the spec layer decodes them. A reserved value is judged as "not reported": any data
/// is accepted (the read merely has to succeed).
pub use nvme::spec::identify::DeallocatedRead;

/// What a wrong block holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// Every byte 0x00.
    Zeroes,
    /// Every byte 0xFF.
    Ones,
    /// Every byte this one (neither 0x00 nor 0xFF).
    Filled(u8),
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
    /// The first and last byte offset (inclusive) in the block that differ from what is
    /// expected (for a deallocated block, from whichever of the DLFEAT pattern and the
    /// previous data it is nearer).
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

/// What a range judged without fault showed besides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Judged {
    /// Deallocated blocks that still held the data written before the deallocate (and not
    /// the DLFEAT pattern): legal, as deallocation is advisory, and worth a note.
    pub kept: u64,
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
    judge_run(block, nsid, lba, block_size, expected, dealloc, Until::AllJudged, &mut tally);
    tally.finish(1).map(|_| ())
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
) -> Result<Judged, JudgeError> {
    let blocks = block_size.blocks_in(buf.len())?;
    if blocks > 0 && first_lba.checked_add(blocks - 1).is_none() {
        return Err(LayoutError::LbaOverflow { first_lba, blocks }.into());
    }
    let Some(namespace) = map.namespace(nsid) else {
        return Ok(Judged::default());
    };
    let mut tally = Tally::default();
    let mut rest = buf;
    for segment in namespace.segments(first_lba, blocks) {
        // Segments tile the range, so the split always succeeds; stop rather than panic.
        let run_len = (segment.count as usize).saturating_mul(block_size.bytes());
        let Some((run, after)) = rest.split_at_checked(run_len) else {
            break;
        };
        judge_run(run, nsid, segment.first, block_size, segment.state, dealloc, Until::AllJudged, &mut tally);
        rest = after;
    }
    tally.finish(blocks)
}

/// Whether every block of `buf` (blocks from `first_lba`) holds what the one expectation
/// `state` allows: [`judge_range`] for a run whose expectation is known already (no map
/// lookup), stopping at the first wrong block with no diagnosis.
pub fn run_holds(
    buf: &[u8],
    nsid: u32,
    first_lba: u64,
    block_size: BlockSize,
    state: Expectation,
    dealloc: DeallocatedRead,
) -> bool {
    let blocks = buf.len() / block_size.bytes();
    if !buf.len().is_multiple_of(block_size.bytes())
        || (blocks > 0 && first_lba.checked_add(blocks as u64 - 1).is_none())
    {
        return false;
    }
    let mut tally = Tally::default();
    judge_run(buf, nsid, first_lba, block_size, state, dealloc, Until::FirstWrong, &mut tally);
    tally.wrong == 0
}

/// How far [`judge_run`] goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Until {
    /// Every block, the first wrong one diagnosed.
    AllJudged,
    /// The first wrong block, undiagnosed (the caller wants only whether all hold).
    FirstWrong,
}

/// The first wrong block seen (diagnosed), how many were wrong, and how many deallocated
/// blocks kept their data.
#[derive(Default)]
struct Tally {
    first: Option<Mismatch>,
    wrong: u64,
    kept: u64,
}

impl Tally {
    fn wrong(&mut self, diagnose: impl FnOnce() -> Mismatch) {
        if self.first.is_none() {
            self.first = Some(diagnose());
        }
        self.wrong += 1;
    }

    fn finish(self, blocks_judged: u64) -> Result<Judged, JudgeError> {
        match self.first {
            None => Ok(Judged { kept: self.kept }),
            Some(first) => {
                Err(JudgeError::Mismatch(Box::new(Mismatch { wrong_blocks: self.wrong, blocks_judged, ..first })))
            }
        }
    }
}

/// One content a block may have, resolved from the map's expectation and DLFEAT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Content {
    Block(BlockTag),
    Zeroes,
    Ones,
    /// Anything but a block of nvtest's (a valid header): no earlier user data.
    NotNvtest,
    Anything,
}

/// What a block may hold: `must`, or else (a deallocated block the controller may have
/// kept) `or_else`. Never `Anything` in `or_else`: then `must` is `Anything` too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Allowed {
    must: Content,
    or_else: Option<Content>,
}

/// What a deallocated block reads as, by DLFEAT.
fn dlfeat_content(dealloc: DeallocatedRead) -> Content {
    match dealloc {
        DeallocatedRead::Zeroes => Content::Zeroes,
        DeallocatedRead::Ones => Content::Ones,
        DeallocatedRead::NotReported | DeallocatedRead::Reserved(_) => Content::Anything,
    }
}

/// What a deallocated block the controller kept reads as.
fn previous_content(nsid: u32, lba: u64, block_size: BlockSize, previous: Option<Previous>) -> Content {
    match previous {
        Some(Previous::Written { generation, seed }) => {
            Content::Block(BlockTag { nsid, lba, generation, seed, block_size })
        }
        Some(Previous::Zeroes) => Content::Zeroes,
        None => Content::Anything,
    }
}

fn allowed(nsid: u32, lba: u64, block_size: BlockSize, expected: Expectation, dealloc: DeallocatedRead) -> Allowed {
    let must = match expected {
        Expectation::Written { generation, seed } => {
            Content::Block(BlockTag { nsid, lba, generation, seed, block_size })
        }
        Expectation::Zeroes => Content::Zeroes,
        Expectation::Unknown => Content::Anything,
        Expectation::Erased { dlfeat: true } => match dlfeat_content(dealloc) {
            Content::Anything => Content::NotNvtest,
            pattern => pattern,
        },
        Expectation::Erased { dlfeat: false } => Content::NotNvtest,
        Expectation::Deallocated { previous } => {
            let (pattern, kept) = (dlfeat_content(dealloc), previous_content(nsid, lba, block_size, previous));
            return match (pattern, kept) {
                (Content::Anything, _) | (_, Content::Anything) => Allowed { must: Content::Anything, or_else: None },
                (pattern, kept) if pattern == kept => Allowed { must: pattern, or_else: None },
                (pattern, kept) => Allowed { must: pattern, or_else: Some(kept) },
            };
        }
    };
    Allowed { must, or_else: None }
}

/// What every block of a run must be, prepared for the fast comparison.
enum Want {
    Block(Stamp),
    Every(u8),
    NoHeader,
}

impl Want {
    fn of(content: Content) -> Option<Want> {
        match content {
            Content::Block(tag) => Some(Want::Block(Stamp::new(&tag))),
            Content::Zeroes => Some(Want::Every(0x00)),
            Content::Ones => Some(Want::Every(0xff)),
            Content::NotNvtest => Some(Want::NoHeader),
            Content::Anything => None,
        }
    }

    /// The index of the first block of `run` (consecutive blocks from `first_lba`) that is not this.
    fn first_wrong(&self, run: &[u8], first_lba: u64, block_bytes: usize) -> Option<usize> {
        match self {
            Want::Block(stamp) => stamp.first_wrong(run, first_lba),
            Want::Every(byte) => first_unfilled(run, block_bytes, *byte),
            Want::NoHeader => {
                run.chunks(block_bytes).position(|block| !matches!(read_header(block), HeaderRead::NoMagic))
            }
        }
    }
}

/// Judges consecutive blocks that share one expectation.
#[allow(clippy::too_many_arguments)]
fn judge_run(
    run: &[u8],
    nsid: u32,
    first_lba: u64,
    block_size: BlockSize,
    expected: Expectation,
    dealloc: DeallocatedRead,
    until: Until,
    tally: &mut Tally,
) {
    let diagnose = |block: &[u8], lba: u64| diagnose(block, nsid, lba, block_size, expected, dealloc);
    let block_bytes = block_size.bytes();
    let allowed = allowed(nsid, first_lba, block_size, expected, dealloc);
    let Some(want) = Want::of(allowed.must) else {
        // Anything is accepted; a deallocated block may still be seen to keep its data.
        if let (Until::AllJudged, Expectation::Deallocated { previous: Some(previous @ Previous::Written { .. }) }) =
            (until, expected)
        {
            tally.kept += count_kept(run, first_lba, block_size, nsid, previous);
        }
        return;
    };
    let or_else = allowed.or_else.and_then(Want::of);
    // The callers checked that the run's LBAs do not pass u64::MAX; wrapping adds cannot panic.
    let lba_of = |index: usize| first_lba.wrapping_add(index as u64);
    let mut next = 0usize;
    while let Some(rest) = run.get(next * block_bytes..) {
        let Some(index) = want.first_wrong(rest, lba_of(next), block_bytes) else { break };
        let wrong = next + index;
        if let Some(or_else) = &or_else {
            // The blocks from `wrong` on that hold the previous data instead are accepted.
            let from = run.get(wrong * block_bytes..).unwrap_or_default();
            let kept =
                or_else.first_wrong(from, lba_of(wrong), block_bytes).unwrap_or(from.len().div_ceil(block_bytes));
            if kept > 0 {
                tally.kept += kept as u64;
                next = wrong + kept;
                continue;
            }
        }
        if until == Until::FirstWrong {
            tally.wrong += 1;
            return;
        }
        let block = run.get(wrong * block_bytes..(wrong + 1) * block_bytes).unwrap_or_default();
        tally.wrong(|| diagnose(block, lba_of(wrong)));
        next = wrong + 1;
    }
}

/// How many blocks of `run` hold exactly `previous` (nvtest's data): blocks whose content
/// is not judged (DLFEAT not reported), counted only for the note.
fn count_kept(run: &[u8], first_lba: u64, block_size: BlockSize, nsid: u32, previous: Previous) -> u64 {
    let Some(want) = Want::of(previous_content(nsid, first_lba, block_size, Some(previous))) else { return 0 };
    let block_bytes = block_size.bytes();
    let mut kept = 0u64;
    let mut next = 0usize;
    while let Some(rest) = run.get(next * block_bytes..).filter(|rest| !rest.is_empty()) {
        let lba = first_lba.wrapping_add(next as u64);
        match want.first_wrong(rest, lba, block_bytes) {
            Some(index) => {
                kept += index as u64;
                next += index + 1;
            }
            None => {
                kept += rest.len().div_ceil(block_bytes) as u64;
                break;
            }
        }
    }
    kept
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

/// The bytes of one content (`block` itself for anything: no difference).
fn content_bytes(content: Content, block: &[u8], lba: u64) -> Vec<u8> {
    match content {
        Content::Block(tag) => Stamp::new(&tag).block(lba),
        Content::Zeroes => vec![0; block.len()],
        Content::Ones => vec![0xff; block.len()],
        // Any bytes but nvtest's header: the header is what differs.
        Content::NotNvtest => {
            let mut bytes = block.to_vec();
            bytes.iter_mut().take(super::block::HEADER_LEN).for_each(|b| *b = !*b);
            bytes
        }
        Content::Anything => block.to_vec(),
    }
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
    let allowed = allowed(nsid, lba, block_size, expected, dealloc);
    let differing = |bytes: &Vec<u8>| block.iter().zip(bytes).filter(|(a, b)| a != b).count();
    let mut expected_bytes = content_bytes(allowed.must, block, lba);
    if let Some(or_else) = allowed.or_else {
        // Measured against whichever of the two it is nearer.
        let kept = content_bytes(or_else, block, lba);
        if differing(&kept) < differing(&expected_bytes) {
            expected_bytes = kept;
        }
    }
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
    if let Some(&first) = block.first() {
        if block.iter().all(|&b| b == first) {
            return Found::Filled(first);
        }
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
        let allowed = allowed(self.nsid, self.lba, self.block_size, self.expected, self.dealloc);
        match (self.expected, allowed.must) {
            (_, Content::Anything) => write!(f, "{at} was judged although anything may be read there")?,
            (Expectation::Erased { dlfeat }, must) => self.fmt_erased(f, &at, dlfeat, must)?,
            (_, Content::NotNvtest) => write!(f, "{at} holds a block header nvtest wrote")?,
            (Expectation::Deallocated { previous }, pattern) => self.fmt_after_deallocate(f, &at, pattern, previous)?,
            (_, Content::Block(expected)) => self.fmt_against_block(f, &at, &expected)?,
            (_, Content::Zeroes) => self.fmt_against_fill(f, &at, "it must read all zeros after Write Zeroes")?,
            (_, Content::Ones) => self.fmt_against_fill(f, &at, "it must read all 0xFF bytes")?,
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
    /// A block that must hold no earlier user data (and, never written, read as DLFEAT
    /// reports): what it holds instead.
    fn fmt_erased(
        &self,
        f: &mut std::fmt::Formatter<'_>,
        at: &str,
        never_written: bool,
        must: Content,
    ) -> std::fmt::Result {
        let since =
            if never_written { "since the namespace was created (never written)" } else { "before a Format NVM" };
        let holds = match self.found {
            Found::Block(tag) | Found::OtherSize(tag) | Found::Torn { header: tag, .. } => {
                return write!(
                    f,
                    "{at} holds the data nvtest wrote to {} {since}: earlier user data is returned",
                    self.whose_any(&tag)
                );
            }
            Found::CorruptHeader => {
                return write!(f, "{at} holds a block header nvtest wrote {since}: earlier user data is returned")
            }
            Found::Zeroes => "all zeros".to_string(),
            Found::Ones => "all 0xFF bytes".to_string(),
            Found::Filled(b) => format!("every byte {b:#04x}"),
            Found::Unrecognisable => "data nvtest does not recognise".to_string(),
        };
        let pattern = if must == Content::Ones { "all 0xFF bytes" } else { "all zeros" };
        write!(f, "{at}, never written, holds {holds}; DLFEAT reports that such a block reads as {pattern}")
    }

    /// "nsid 1's LBA 0x1f3 (generation 3)": where a block came from.
    fn whose_any(&self, tag: &BlockTag) -> String {
        format!("nsid {}'s LBA {:#x} (generation {})", tag.nsid, tag.lba, tag.generation)
    }

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
            Found::Filled(byte) => {
                write!(f, "{at} reads all {byte:#04X} bytes where generation {generation} was written")
            }
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

    /// Against a fill the block must hold (`must` says which and why).
    fn fmt_against_fill(&self, f: &mut std::fmt::Formatter<'_>, at: &str, must: &str) -> std::fmt::Result {
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
            Found::Filled(byte) => write!(f, "{at} reads all {byte:#04X} bytes but {must}"),
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

    /// A deallocated block that holds neither the DLFEAT `pattern` nor the data written
    /// before (`previous`): "LBA 0x64 of nsid 1 reads all 0xFF bytes after a deallocate;
    /// DLFEAT promises zeroes, or else the last data written (generation 3)".
    fn fmt_after_deallocate(
        &self,
        f: &mut std::fmt::Formatter<'_>,
        at: &str,
        pattern: Content,
        previous: Option<Previous>,
    ) -> std::fmt::Result {
        let promise = match pattern {
            Content::Ones => "ones (all 0xFF bytes)",
            _ => "zeroes",
        };
        let kept = match previous {
            Some(Previous::Written { generation, seed }) => {
                Some(BlockTag { nsid: self.nsid, lba: self.lba, generation, seed, block_size: self.block_size })
            }
            _ => None,
        };
        let or_else = match previous {
            Some(Previous::Written { generation, .. }) => {
                format!(", or else the last data written (generation {generation})")
            }
            Some(Previous::Zeroes) if pattern != Content::Zeroes => {
                ", or else the last data written (zeros, by Write Zeroes)".to_string()
            }
            _ => String::new(),
        };
        let (holds, why) = match self.found {
            Found::Zeroes => ("reads all zeros".to_string(), ""),
            Found::Ones => ("reads all 0xFF bytes".to_string(), ""),
            Found::Filled(byte) => (format!("reads all {byte:#04X} bytes"), ""),
            Found::Block(tag) => {
                let why = match kept {
                    _ if tag.nsid != self.nsid => ": data from another namespace",
                    _ if tag.lba != self.lba => ": a misdirected write or read",
                    Some(kept) if tag.seed != kept.seed => ": stale data from another run",
                    Some(kept) if tag.generation < kept.generation => ": stale data from before the last write",
                    Some(_) => ": a write nvtest did not see complete took effect",
                    None => "",
                };
                let seed = match kept {
                    Some(kept) if tag.nsid == self.nsid && tag.lba == self.lba && tag.seed != kept.seed => {
                        format!(" written with seed {:#x}, not {:#x}", tag.seed, kept.seed)
                    }
                    _ => String::new(),
                };
                (format!("holds {}{seed}", self.whose(&tag)), why)
            }
            Found::OtherSize(tag) => {
                (format!("holds the start of a {} block ({})", tag.block_size, self.whose(&tag)), "")
            }
            Found::Torn { header, from, rest } => {
                let head = self.whose(&header);
                (
                    format!(
                        "holds a torn block ({head}'s data up to byte {from:#x}, then {})",
                        self.rest(rest, kept.as_ref())
                    ),
                    "",
                )
            }
            Found::CorruptHeader => ("holds an nvtest header that fails its checksum".to_string(), ""),
            Found::Unrecognisable => ("holds unrecognisable data".to_string(), ""),
        };
        write!(f, "{at} {holds} after a deallocate; DLFEAT promises {promise}{or_else}{why}")
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

    fn mismatch<T: std::fmt::Debug>(result: Result<T, JudgeError>) -> Mismatch {
        match result {
            Err(JudgeError::Mismatch(mismatch)) => *mismatch,
            other => panic!("expected a mismatch, got {other:?}"),
        }
    }

    /// run_holds agrees with judge_range on a run of one expectation: the blocks written
    /// hold, one block of another generation (or a partial block) does not.
    #[test]
    fn a_run_holds_its_expectation_until_one_block_differs() {
        let mut run: Vec<u8> = (0..8).flat_map(|i| written(1, 100 + i, 3, 512)).collect();
        let deallocated = Expectation::Deallocated { previous: None };
        assert!(run_holds(&run, 1, 100, size(512), WRITTEN, DeallocatedRead::Zeroes));
        assert!(run_holds(&run, 1, 100, size(512), Expectation::Unknown, DeallocatedRead::Zeroes));
        assert!(run_holds(&run, 1, 100, size(512), deallocated, DeallocatedRead::NotReported));
        assert!(!run_holds(&run, 1, 101, size(512), WRITTEN, DeallocatedRead::Zeroes), "other LBAs");
        assert!(!run_holds(&run[..700], 1, 100, size(512), WRITTEN, DeallocatedRead::Zeroes), "a partial block");
        run[5 * 512..6 * 512].copy_from_slice(&written(1, 105, 4, 512));
        assert!(!run_holds(&run, 1, 100, size(512), WRITTEN, DeallocatedRead::Zeroes), "another generation");
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
    fn deallocated_blocks_read_as_dlfeat_says_or_as_the_data_written_before() {
        let zeros = [0u8; 512];
        let ones = [0xffu8; 512];
        let data = written(2, 0x10, 3, 512);
        let older = written(2, 0x10, 2, 512);
        let judge = |block: &[u8], dealloc| judge_block(block, 2, 0x10, WRITTEN.deallocated(), dealloc);
        assert_eq!(judge(&zeros, DeallocatedRead::Zeroes), Ok(()));
        assert_eq!(judge(&ones, DeallocatedRead::Ones), Ok(()));
        // The controller may take no action: the last data written is still right.
        assert_eq!(judge(&data, DeallocatedRead::Zeroes), Ok(()));
        assert_eq!(judge(&data, DeallocatedRead::Ones), Ok(()));
        for block in [&zeros[..], &ones[..], &data[..], &older[..], &[0x5a; 512][..]] {
            assert_eq!(judge(block, DeallocatedRead::NotReported), Ok(()));
        }
        let m = mismatch(judge(&ones, DeallocatedRead::Zeroes));
        assert_eq!(
            m.to_string(),
            "LBA 0x10 of nsid 2 reads all 0xFF bytes after a deallocate; DLFEAT promises zeroes, or else the last \
             data written (generation 3) (bytes 0x0..=0x1ff of the 512-byte block differ)"
        );
        let m = mismatch(judge(&zeros, DeallocatedRead::Ones));
        assert!(
            m.to_string().starts_with(
                "LBA 0x10 of nsid 2 reads all zeros after a deallocate; DLFEAT promises ones (all 0xFF bytes), \
                 or else the last data written (generation 3) ("
            ),
            "{m}"
        );
        let m = mismatch(judge(&older, DeallocatedRead::Zeroes));
        assert!(
            m.to_string().starts_with(
                "LBA 0x10 of nsid 2 holds generation 2 after a deallocate; DLFEAT promises zeroes, or else the last \
                 data written (generation 3): stale data from before the last write ("
            ),
            "{m}"
        );
    }

    #[test]
    fn a_block_of_one_other_byte_is_named_by_that_byte() {
        let m = mismatch(judge_block(&[0xa5; 512], 2, 0x10, WRITTEN.deallocated(), DeallocatedRead::Zeroes));
        assert_eq!(m.found, Found::Filled(0xa5));
        assert!(
            m.to_string().starts_with(
                "LBA 0x10 of nsid 2 reads all 0xA5 bytes after a deallocate; DLFEAT promises zeroes, or else the \
                 last data written (generation 3) ("
            ),
            "{m}"
        );
        let m = mismatch(judge_block(&[0x01; 64], 2, 0x10, WRITTEN, DeallocatedRead::Zeroes));
        assert!(m.to_string().contains("reads all 0x01 bytes where generation 3 was written"), "{m}");
    }

    #[test]
    fn a_deallocated_block_torn_from_its_old_data_is_measured_against_that_data() {
        let mut block = written(2, 0x10, 3, 4096);
        block[0x300..].fill(0xff);
        let m = mismatch(judge_block(&block, 2, 0x10, WRITTEN.deallocated(), DeallocatedRead::Zeroes));
        assert_eq!((m.first_difference, m.last_difference), (0x300, 0xfff));
        assert_eq!(m.found, Found::Torn { header: tag_of(&block), from: 0x300, rest: Rest::Ones });
        assert!(
            m.to_string().contains(
                "holds a torn block (generation 3's data up to byte 0x300, then 0xFF bytes) after a deallocate; \
                 DLFEAT promises zeroes, or else the last data written (generation 3) (bytes 0x300..=0xfff"
            ),
            "{m}"
        );
    }

    #[test]
    fn a_deallocated_block_whose_old_data_is_unknown_may_read_as_anything() {
        let unknown = Expectation::Unknown.deallocated();
        assert_eq!(unknown, Expectation::Deallocated { previous: None });
        for dealloc in [DeallocatedRead::Zeroes, DeallocatedRead::Ones, DeallocatedRead::NotReported] {
            assert_eq!(judge_block(&[0x5a; 512], 2, 0x10, unknown, dealloc), Ok(()));
        }
    }

    #[test]
    fn a_deallocated_write_zeroes_block_reads_as_dlfeat_says_or_as_zeros() {
        let after_zeroes = Expectation::Zeroes.deallocated();
        assert_eq!(after_zeroes, Expectation::Deallocated { previous: Some(Previous::Zeroes) });
        let judge = |block: &[u8], dealloc| judge_block(block, 2, 0x10, after_zeroes, dealloc);
        assert_eq!(judge(&[0; 512], DeallocatedRead::Ones), Ok(()));
        assert_eq!(judge(&[0xff; 512], DeallocatedRead::Ones), Ok(()));
        let m = mismatch(judge(&[0xff; 512], DeallocatedRead::Zeroes));
        assert!(
            m.to_string()
                .starts_with("LBA 0x10 of nsid 2 reads all 0xFF bytes after a deallocate; DLFEAT promises zeroes ("),
            "{m}"
        );
        let mut garbage = [0x5a; 512];
        garbage[7] = 0;
        let m = mismatch(judge(&garbage, DeallocatedRead::Ones));
        assert!(
            m.to_string().contains(
                "holds unrecognisable data after a deallocate; DLFEAT promises ones (all 0xFF bytes), or else the last \
                 data written (zeros, by Write Zeroes)"
            ),
            "{m}"
        );
    }

    #[test]
    fn deallocating_again_keeps_what_the_block_held_before_the_first_deallocate() {
        assert_eq!(WRITTEN.deallocated().deallocated(), WRITTEN.deallocated());
        assert_eq!(
            WRITTEN.deallocated(),
            Expectation::Deallocated { previous: Some(Previous::Written { generation: 3, seed: 7 }) }
        );
    }

    #[test]
    fn another_block_in_a_deallocated_block_is_named() {
        let block = written(2, 0x11, 3, 512);
        let m = mismatch(judge_block(&block, 2, 0x10, WRITTEN.deallocated(), DeallocatedRead::Zeroes));
        assert!(
            m.to_string().starts_with(
                "LBA 0x10 of nsid 2 holds LBA 0x11 (generation 3) after a deallocate; DLFEAT promises zeroes, \
                 or else the last data written (generation 3): a misdirected write or read"
            ),
            "{m}"
        );
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
        // LBAs 104 and 105 are deallocated and still hold their data (legal); 108 and 109 are unknown.
        assert_eq!(judge_range(&buf, 2, 100, size(512), &map, DeallocatedRead::Zeroes), Ok(Judged { kept: 2 }));
        assert_eq!(judge_range(&buf, 2, 100, size(512), &map, DeallocatedRead::NotReported), Ok(Judged { kept: 2 }));
        let block = |lba: usize| (lba - 100) * 512..(lba - 99) * 512;
        buf[block(104)].fill(0);
        assert_eq!(judge_range(&buf, 2, 100, size(512), &map, DeallocatedRead::Zeroes), Ok(Judged { kept: 1 }));
        buf[block(105)].fill(0);
        assert_eq!(judge_range(&buf, 2, 100, size(512), &map, DeallocatedRead::Zeroes), Ok(Judged { kept: 0 }));
        buf[block(104).start..block(105).end].fill(0xff);
        let m = mismatch(judge_range(&buf, 2, 100, size(512), &map, DeallocatedRead::Zeroes));
        assert_eq!((m.lba, m.wrong_blocks, m.blocks_judged), (104, 2, 10));
        assert!(m.to_string().ends_with("; the first of 2 wrong blocks among 10 read)"), "{m}");
    }

    #[test]
    fn deallocated_blocks_alternating_between_pattern_and_old_data_are_all_accepted() {
        let mut map = HostMap::new();
        map.record_write(2, 0, 64, 3, 7);
        map.record_deallocate(2, 0, 64);
        let mut buf = vec![0u8; 64 * 4096];
        fill_blocks(&mut buf, &BlockTag { nsid: 2, lba: 0, generation: 3, seed: 7, block_size: size(4096) })
            .expect("64 blocks");
        for (lba, block) in buf.chunks_exact_mut(4096).enumerate() {
            if lba % 3 == 0 {
                block.fill(0xff);
            }
        }
        assert_eq!(judge_range(&buf, 2, 0, size(4096), &map, DeallocatedRead::Ones), Ok(Judged { kept: 42 }));
        buf[7 * 4096 + 9] ^= 1;
        buf[9 * 4096 + 9] ^= 1;
        let m = mismatch(judge_range(&buf, 2, 0, size(4096), &map, DeallocatedRead::Ones));
        assert_eq!((m.lba, m.wrong_blocks, m.first_difference), (7, 2, 9));
    }

    #[test]
    fn a_range_of_a_namespace_the_map_does_not_know_is_accepted() {
        let map = HostMap::new();
        assert_eq!(judge_range(&[1u8; 1024], 9, 0, size(512), &map, DeallocatedRead::Zeroes), Ok(Judged::default()));
    }

    #[test]
    fn a_range_past_the_last_lba_is_nvtest_s_error() {
        let map = HostMap::new();
        let result = judge_range(&[0u8; 1024], 1, u64::MAX, size(512), &map, DeallocatedRead::Zeroes);
        assert_eq!(result, Err(JudgeError::Layout(LayoutError::LbaOverflow { first_lba: u64::MAX, blocks: 2 })));
    }

    #[test]
    fn a_reserved_dlfeat_value_is_judged_as_not_reported() {
        assert_eq!(DeallocatedRead::from_bits(0b1001), DeallocatedRead::Zeroes);
        assert_eq!(DeallocatedRead::from_bits(0b0011), DeallocatedRead::Reserved(3));
        assert_eq!(dlfeat_content(DeallocatedRead::Reserved(3)), dlfeat_content(DeallocatedRead::NotReported));
        assert_eq!(dlfeat_content(DeallocatedRead::NotReported), Content::Anything);
    }

    fn tag_of(block: &[u8]) -> BlockTag {
        super::super::block::decode_header(block).expect("a valid header")
    }
}
