//! The self-describing block format: how a block nvtest writes is generated from its
//! [`BlockTag`], and how a block read back is decoded. The byte layout is documented in the
//! parent module ([`crate::data`]).
//!
//! Speed matters here: a verify pass generates or checks every byte it moves, so the body
//! is a fixed keystream XOR a per-tag key (one load, one XOR, one store per word, which the
//! compiler vectorises), and a run of consecutive blocks of one write shares a `Stamp`
//! that leaves a mix and a table lookup per block (the header checksum is updated from one
//! LBA to the next rather than computed afresh).

use crc::{Crc, Table, CRC_32_ISCSI};

use super::wide::{end_streaming, store_line, with_wide_vectors};

/// The first eight bytes of every block nvtest writes.
pub const MAGIC: [u8; 8] = *b"nvtestB1";
/// Length of the header at the start of every block.
pub const HEADER_LEN: usize = 64;
/// The header checksum covers bytes 0..48.
const CHECKED_LEN: usize = 48;
/// Where the LBA is in the header.
const LBA_OFFSET: usize = 32;
const HEADER_WORDS: usize = HEADER_LEN / 8;
/// The keystream is 512 words (4 KiB) long; every 4 KiB chunk of a block has its own key.
const CHUNK_WORDS: usize = 512;
/// Runs of at least this many bytes are written with non-temporal stores: they would not
/// stay in the caches anyway, and writing around them saves reading every line from memory
/// before overwriting it (memset does the same for large buffers).
const STREAMING_FROM: usize = 8 << 20;
/// SplitMix64's increment (2^64 / golden ratio).
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
/// Mixed into the seed first, so that seed 0 is not special ("nvtest-d").
const KEY_SALT: u64 = 0x6e76_7465_7374_2d64;

/// CRC-32C (Castagnoli, the iSCSI CRC), slice-by-16.
static CRC32C: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISCSI);

/// The body keystream: the first 512 outputs of SplitMix64 seeded with 0.
static KEYSTREAM: [u64; CHUNK_WORDS] = keystream();

/// A buffer or block size nvtest cannot work with: always nvtest's own mistake, never the drive's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("block size {0} is not a multiple of 8 bytes of at least 64 (and below 4 GiB)")]
    BlockSize(u64),
    #[error("LBADS {0} gives no block size nvtest supports (2^6 to 2^31 bytes)")]
    Lbads(u8),
    #[error("a buffer of {len} bytes is not a whole number of {block_size}-byte blocks")]
    Length { len: usize, block_size: u32 },
    #[error("{blocks} blocks from LBA {first_lba:#x} run past the last possible LBA")]
    LbaOverflow { first_lba: u64, blocks: u64 },
}

/// A logical block size: a multiple of 8 bytes, at least 64.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockSize(u32);

impl BlockSize {
    /// The smallest block: the header alone.
    pub const MIN: u32 = 64;

    pub fn new(bytes: u32) -> Result<Self, LayoutError> {
        if bytes >= Self::MIN && bytes.is_multiple_of(8) {
            Ok(Self(bytes))
        } else {
            Err(LayoutError::BlockSize(u64::from(bytes)))
        }
    }

    /// The block size of an LBA format: 2^LBADS bytes.
    pub fn from_lbads(lbads: u8) -> Result<Self, LayoutError> {
        if (6..32).contains(&lbads) {
            Ok(Self(1 << lbads))
        } else {
            Err(LayoutError::Lbads(lbads))
        }
    }

    /// The size of a buffer, if it is a valid block size.
    pub fn of_len(len: usize) -> Result<Self, LayoutError> {
        let bytes = u32::try_from(len).map_err(|_| LayoutError::BlockSize(len as u64))?;
        Self::new(bytes)
    }

    pub fn get(self) -> u32 {
        self.0
    }

    pub fn bytes(self) -> usize {
        self.0 as usize
    }

    /// How many whole blocks `len` bytes hold; an error unless `len` is a multiple.
    pub fn blocks_in(self, len: usize) -> Result<u64, LayoutError> {
        if len.is_multiple_of(self.bytes()) {
            Ok((len / self.bytes()) as u64)
        } else {
            Err(LayoutError::Length { len, block_size: self.0 })
        }
    }
}

impl std::fmt::Display for BlockSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-byte", self.0)
    }
}

/// Everything a written block's content is generated from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockTag {
    pub nsid: u32,
    pub lba: u64,
    /// Which write this is: the host map remembers the generation last written to each block.
    pub generation: u64,
    /// Per run or case, so that data from another run is never taken for this one's.
    pub seed: u64,
    pub block_size: BlockSize,
}

/// Writes the block `tag` describes into `buf`, which must be exactly one block long.
pub fn fill_block(buf: &mut [u8], tag: &BlockTag) -> Result<(), LayoutError> {
    if buf.len() != tag.block_size.bytes() {
        return Err(LayoutError::Length { len: buf.len(), block_size: tag.block_size.get() });
    }
    Stamp::new(tag).fill(buf, tag.lba);
    Ok(())
}

/// Writes consecutive blocks into `buf`: `first`, then the same tag at LBA + 1, LBA + 2 …
pub fn fill_blocks(buf: &mut [u8], first: &BlockTag) -> Result<(), LayoutError> {
    let blocks = first.block_size.blocks_in(buf.len())?;
    if blocks > 0 && first.lba.checked_add(blocks - 1).is_none() {
        return Err(LayoutError::LbaOverflow { first_lba: first.lba, blocks });
    }
    Stamp::new(first).fill_run(buf, first.lba);
    Ok(())
}

/// The tag in a block's header, if the header is valid (magic, checksum, reserved bytes,
/// block size field). The tag's block size is the one the header names, which may differ
/// from the buffer's length.
pub fn decode_header(block: &[u8]) -> Option<BlockTag> {
    match read_header(block) {
        HeaderRead::Valid(tag) | HeaderRead::OtherSize(tag) => Some(tag),
        HeaderRead::NoMagic | HeaderRead::Corrupt => None,
    }
}

/// What a block's first bytes say it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeaderRead {
    /// A valid header naming the buffer's own block size.
    Valid(BlockTag),
    /// A valid header of a block of another size (data from before a format).
    OtherSize(BlockTag),
    /// The magic, but a checksum, reserved byte or block size field that is wrong.
    Corrupt,
    /// Not an nvtest block at all.
    NoMagic,
}

pub(crate) fn read_header(block: &[u8]) -> HeaderRead {
    let Some(header) = block.first_chunk::<HEADER_LEN>() else {
        return HeaderRead::NoMagic;
    };
    let (words, _) = header.as_chunks::<8>();
    let word = |index: usize| words.get(index).map_or(0, |word| u64::from_le_bytes(*word));
    if word(0) != u64::from_le_bytes(MAGIC) {
        return HeaderRead::NoMagic;
    }
    let crc = CRC32C.checksum(header.get(..CHECKED_LEN).unwrap_or_default());
    // Words 5 and 7 are reserved, and so are the upper four bytes of word 6.
    if word(6) != u64::from(crc) || word(5) != 0 || word(7) != 0 {
        return HeaderRead::Corrupt;
    }
    let Ok(block_size) = BlockSize::new((word(1) >> 32) as u32) else {
        return HeaderRead::Corrupt;
    };
    let tag = BlockTag { nsid: word(1) as u32, lba: word(4), generation: word(2), seed: word(3), block_size };
    if block_size.bytes() == block.len() {
        HeaderRead::Valid(tag)
    } else {
        HeaderRead::OtherSize(tag)
    }
}

/// What the blocks of one write share (namespace, block size, generation, seed), prepared
/// once for a run of consecutive LBAs.
#[derive(Clone)]
pub(crate) struct Stamp {
    /// Header words 0..4: magic, NSID and block size, generation, seed.
    fixed: [u64; 4],
    /// The checksum of the header with LBA 0.
    crc_lba_zero: u32,
    /// The body key before the LBA is mixed in.
    key_prefix: u64,
    block_size: BlockSize,
}

impl Stamp {
    pub(crate) fn new(tag: &BlockTag) -> Stamp {
        let fixed = [
            u64::from_le_bytes(MAGIC),
            u64::from(tag.nsid) | u64::from(tag.block_size.get()) << 32,
            tag.generation,
            tag.seed,
        ];
        let mut header = [0u8; CHECKED_LEN];
        for (bytes, word) in header.as_chunks_mut::<8>().0.iter_mut().zip(fixed) {
            *bytes = word.to_le_bytes();
        }
        let key_prefix = mix(mix(mix(tag.seed ^ KEY_SALT) ^ fixed[1]) ^ tag.generation);
        Stamp { fixed, crc_lba_zero: CRC32C.checksum(&header), key_prefix, block_size: tag.block_size }
    }

    /// The header checksum of the block at `lba`.
    fn crc(&self, lba: u64) -> u32 {
        self.crc_lba_zero ^ lba_crc(lba)
    }

    /// The eight header words of the block at `lba`, whose header checksum is `crc`.
    fn header(&self, lba: u64, crc: u32) -> [u64; HEADER_WORDS] {
        let [magic, nsid_and_size, generation, seed] = self.fixed;
        [magic, nsid_and_size, generation, seed, lba, 0, u64::from(crc), 0]
    }

    fn block_key(&self, lba: u64) -> u64 {
        mix(self.key_prefix ^ lba)
    }

    /// Writes consecutive blocks from `first_lba` into `run` (whole blocks; a partial last
    /// block gets that block's first bytes, if it holds the header). LBAs wrap after
    /// `u64::MAX`; the public callers refuse such runs.
    pub(crate) fn fill_run(&self, run: &mut [u8], first_lba: u64) {
        let block_bytes = self.block_size.bytes();
        if run.len() >= STREAMING_FROM {
            with_wide_vectors(
                #[inline(always)]
                || {
                    let (mut lba, mut crc) = (first_lba, self.crc(first_lba));
                    for block in run.chunks_mut(block_bytes) {
                        self.fill_with::<true>(block, lba, crc);
                        crc ^= next_lba_crc_change(lba);
                        lba = lba.wrapping_add(1);
                    }
                },
            );
            end_streaming();
        } else {
            with_wide_vectors(
                #[inline(always)]
                || {
                    let (mut lba, mut crc) = (first_lba, self.crc(first_lba));
                    for block in run.chunks_mut(block_bytes) {
                        self.fill_with::<false>(block, lba, crc);
                        crc ^= next_lba_crc_change(lba);
                        lba = lba.wrapping_add(1);
                    }
                },
            );
        }
    }

    /// The index of the first block of `run` (consecutive blocks from `first_lba`) that is
    /// not exactly what this stamp writes there.
    pub(crate) fn first_wrong(&self, run: &[u8], first_lba: u64) -> Option<usize> {
        let block_bytes = self.block_size.bytes();
        with_wide_vectors(
            #[inline(always)]
            || {
                let (mut lba, mut crc) = (first_lba, self.crc(first_lba));
                for (index, block) in run.chunks(block_bytes).enumerate() {
                    if !self.matches(block, lba, crc) {
                        return Some(index);
                    }
                    crc ^= next_lba_crc_change(lba);
                    lba = lba.wrapping_add(1);
                }
                None
            },
        )
    }

    /// Writes the block at `lba` into `block` (one block long; a buffer shorter than the
    /// header is left alone, a longer one gets the block followed by more pattern).
    pub(crate) fn fill(&self, block: &mut [u8], lba: u64) {
        self.fill_with::<false>(block, lba, self.crc(lba));
    }

    /// [`Stamp::fill`], with non-temporal stores if `STREAMING`.
    #[inline(always)]
    fn fill_with<const STREAMING: bool>(&self, block: &mut [u8], lba: u64, crc: u32) {
        let (words, _) = block.as_chunks_mut::<8>();
        let Some((head, body)) = words.split_first_chunk_mut::<HEADER_WORDS>() else {
            return;
        };
        store_line::<STREAMING>(head, self.header(lba, crc));
        let key = self.block_key(lba);
        let (first, later) = body.split_at_mut((CHUNK_WORDS - HEADER_WORDS).min(body.len()));
        fill_words::<STREAMING>(first, &KEYSTREAM[HEADER_WORDS..], key);
        for (chunk, words) in (1..).zip(later.chunks_mut(CHUNK_WORDS)) {
            fill_words::<STREAMING>(words, &KEYSTREAM, chunk_key(key, chunk));
        }
    }

    /// Whether `block` is exactly the block at `lba`, whose header checksum is `crc`.
    #[inline(always)]
    fn matches(&self, block: &[u8], lba: u64, crc: u32) -> bool {
        if block.len() != self.block_size.bytes() {
            return false;
        }
        let (words, _) = block.as_chunks::<8>();
        let Some((head, body)) = words.split_first_chunk::<HEADER_WORDS>() else {
            return false;
        };
        let mut differ = head
            .iter()
            .zip(self.header(lba, crc))
            .fold(0, |acc, (word, header)| acc | (u64::from_le_bytes(*word) ^ header));
        let key = self.block_key(lba);
        let (first, later) = body.split_at((CHUNK_WORDS - HEADER_WORDS).min(body.len()));
        differ |= differing_bits(first, &KEYSTREAM[HEADER_WORDS..], key);
        for (chunk, words) in (1..).zip(later.chunks(CHUNK_WORDS)) {
            if differ != 0 {
                return false;
            }
            differ |= differing_bits(words, &KEYSTREAM, chunk_key(key, chunk));
        }
        differ == 0
    }

    /// The block at `lba`, in a new buffer (for diagnosis, not for the fast paths).
    pub(crate) fn block(&self, lba: u64) -> Vec<u8> {
        let mut block = vec![0u8; self.block_size.bytes()];
        self.fill(&mut block, lba);
        block
    }
}

/// Whether the whole words of `block` from byte `from` to the end of that 4 KiB chunk are
/// the keystream XOR one constant, i.e. the body of some nvtest block (at least one word).
pub(crate) fn follows_keystream(block: &[u8], from: usize) -> bool {
    let first_word = from.div_ceil(8);
    let chunk_end = (first_word / CHUNK_WORDS + 1) * CHUNK_WORDS;
    let (words, _) = block.as_chunks::<8>();
    let mut keys = words
        .iter()
        .zip(KEYSTREAM.iter().cycle())
        .take(chunk_end)
        .skip(first_word)
        .map(|(word, stream)| u64::from_le_bytes(*word) ^ stream);
    match keys.next() {
        Some(key) => keys.all(|other| other == key),
        None => false,
    }
}

/// Writes `stream[i] ^ key` into `words[i]`, a 64-byte line of eight words at a time (the
/// block's lines are aligned with the keystream's, so the compiler can use whole vectors).
#[inline(always)]
fn fill_words<const STREAMING: bool>(words: &mut [[u8; 8]], stream: &[u64], key: u64) {
    let (lines, tail) = words.as_chunks_mut::<8>();
    let (stream_lines, _) = stream.as_chunks::<8>();
    for (line, stream) in lines.iter_mut().zip(stream_lines) {
        // A whole line is loaded before any of it is stored: no aliasing question stops
        // the compiler from using vectors.
        let stream: [u64; 8] = *stream;
        store_line::<STREAMING>(line, stream.map(|stream| stream ^ key));
    }
    let stream_tail = stream.get(lines.len() * 8..).unwrap_or_default();
    for (word, stream) in tail.iter_mut().zip(stream_tail) {
        *word = (stream ^ key).to_le_bytes();
    }
}

/// The OR of `words[i] ^ stream[i] ^ key` over all words: zero if and only if they match.
#[inline(always)]
fn differing_bits(words: &[[u8; 8]], stream: &[u64], key: u64) -> u64 {
    let (lines, tail) = words.as_chunks::<8>();
    let (stream_lines, _) = stream.as_chunks::<8>();
    // One accumulator per word of a line, so that the compiler can keep them in vectors.
    let mut differ = [0u64; 8];
    for (line, stream) in lines.iter().zip(stream_lines) {
        let line: [u64; 8] = line.map(u64::from_le_bytes);
        for ((differ, word), stream) in differ.iter_mut().zip(line).zip(stream) {
            *differ |= word ^ stream ^ key;
        }
    }
    let stream_tail = stream.get(lines.len() * 8..).unwrap_or_default();
    let tail =
        tail.iter().zip(stream_tail).fold(0, |acc, (word, stream)| acc | (u64::from_le_bytes(*word) ^ stream ^ key));
    differ.iter().fold(tail, |acc, differ| acc | differ)
}

/// The key of 4 KiB chunk `chunk` (1, 2 …) of a block whose key (that of chunk 0) is `block_key`.
fn chunk_key(block_key: u64, chunk: u64) -> u64 {
    mix(block_key.wrapping_add(chunk.wrapping_mul(GOLDEN)))
}

/// How the header checksum changes from LBA 0 to `lba`: CRC-32C is affine over GF(2), so
/// for messages of one length crc(a ^ b) = crc(a) ^ crc(b) ^ crc(0), and the change is the
/// XOR of one table entry per LBA byte.
fn lba_crc(lba: u64) -> u32 {
    let mut crc = 0;
    for (table, byte) in LBA_CRC.iter().zip(lba.to_le_bytes()) {
        crc ^= table[usize::from(byte)];
    }
    crc
}

/// How the header checksum changes from `lba` to `lba + 1`: the LBA's trailing one bits and
/// the zero above them flip, so one entry per count of trailing ones covers every step.
fn next_lba_crc_change(lba: u64) -> u32 {
    NEXT_LBA_CRC.get(lba.trailing_ones() as usize).copied().unwrap_or_default()
}

/// `LBA_CRC[k][v]`: the checksum change of a header whose LBA byte k is v, against LBA 0.
static LBA_CRC: [[u32; 256]; 8] = lba_crc_tables();
/// `NEXT_LBA_CRC[k]`: the checksum change when LBA bits 0..=k flip (k = 64: all of them).
static NEXT_LBA_CRC: [u32; 65] = next_lba_crc_table();

/// The checksum change of a header with only LBA bit `bit` set, against LBA 0.
const fn lba_bit_crc(bit: usize) -> u32 {
    let mut header = [0u8; CHECKED_LEN];
    header[LBA_OFFSET + bit / 8] = 1 << (bit % 8);
    CRC32C.checksum(&header) ^ CRC32C.checksum(&[0u8; CHECKED_LEN])
}

const fn lba_crc_tables() -> [[u32; 256]; 8] {
    let mut tables = [[0u32; 256]; 8];
    let mut byte = 0;
    while byte < 8 {
        let mut value = 1;
        while value < 256 {
            let mut bit = 0;
            while bit < 8 {
                if value & (1 << bit) != 0 {
                    tables[byte][value] ^= lba_bit_crc(byte * 8 + bit);
                }
                bit += 1;
            }
            value += 1;
        }
        byte += 1;
    }
    tables
}

const fn next_lba_crc_table() -> [u32; 65] {
    let mut table = [0u32; 65];
    let mut flipped = 0;
    let mut bits = 0;
    while bits < 65 {
        if bits < 64 {
            flipped ^= lba_bit_crc(bits);
        }
        table[bits] = flipped;
        bits += 1;
    }
    table
}

/// The SplitMix64 finaliser: a bijection on u64 in which every input bit affects every output bit.
const fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const fn keystream() -> [u64; CHUNK_WORDS] {
    let mut stream = [0u64; CHUNK_WORDS];
    let mut i = 0;
    while i < CHUNK_WORDS {
        stream[i] = mix((i as u64 + 1).wrapping_mul(GOLDEN));
        i += 1;
    }
    stream
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(block_size: u32) -> BlockTag {
        BlockTag {
            nsid: 2,
            lba: 0x1f3,
            generation: 3,
            seed: 0xfeed,
            block_size: BlockSize::new(block_size).expect("valid block size"),
        }
    }

    #[test]
    fn block_sizes_are_multiples_of_eight_of_at_least_64() {
        assert!(BlockSize::new(64).is_ok());
        assert!(BlockSize::new(520).is_ok());
        assert_eq!(BlockSize::new(56), Err(LayoutError::BlockSize(56)));
        assert_eq!(BlockSize::new(513), Err(LayoutError::BlockSize(513)));
        assert_eq!(BlockSize::from_lbads(12).map(BlockSize::get), Ok(4096));
        assert_eq!(BlockSize::from_lbads(32), Err(LayoutError::Lbads(32)));
        assert_eq!(BlockSize::from_lbads(5), Err(LayoutError::Lbads(5)));
    }

    #[test]
    fn keystream_is_splitmix64_from_zero() {
        // The reference SplitMix64 sequence for seed 0.
        assert_eq!(KEYSTREAM[0], 0xe220_a839_7b1d_cdaf);
        assert_eq!(KEYSTREAM[1], 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn header_holds_the_tag_at_the_documented_offsets() {
        let tag = tag(512);
        let mut block = vec![0u8; 512];
        fill_block(&mut block, &tag).expect("one block");
        assert_eq!(&block[0..8], b"nvtestB1");
        assert_eq!(block[8..12], 2u32.to_le_bytes());
        assert_eq!(block[12..16], 512u32.to_le_bytes());
        assert_eq!(block[16..24], 3u64.to_le_bytes());
        assert_eq!(block[24..32], 0xfeedu64.to_le_bytes());
        assert_eq!(block[32..40], 0x1f3u64.to_le_bytes());
        assert_eq!(block[40..48], [0; 8]);
        let crc = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI).checksum(&block[..48]);
        assert_eq!(block[48..52], crc.to_le_bytes());
        assert_eq!(block[52..64], [0; 12]);
        assert_eq!(decode_header(&block), Some(tag));
    }

    #[test]
    fn fill_rejects_a_buffer_of_the_wrong_length() {
        let mut block = vec![0u8; 500];
        assert_eq!(fill_block(&mut block, &tag(512)), Err(LayoutError::Length { len: 500, block_size: 512 }));
        assert_eq!(fill_blocks(&mut block, &tag(512)), Err(LayoutError::Length { len: 500, block_size: 512 }));
    }

    #[test]
    fn bulk_fill_equals_block_by_block_fill() {
        for size in [64, 512, 4096, 8192 + 8] {
            let first = tag(size);
            let mut bulk = vec![0u8; size as usize * 3];
            fill_blocks(&mut bulk, &first).expect("three blocks");
            for (i, block) in bulk.chunks_exact(size as usize).enumerate() {
                let mut single = vec![0u8; size as usize];
                fill_block(&mut single, &BlockTag { lba: first.lba + i as u64, ..first }).expect("one block");
                assert_eq!(block, &single[..], "block {i} of {size} bytes");
            }
        }
    }

    #[test]
    fn bulk_fill_refuses_to_run_past_the_last_lba() {
        let mut buf = vec![0u8; 1024];
        let first = BlockTag { lba: u64::MAX, ..tag(512) };
        assert_eq!(fill_blocks(&mut buf, &first), Err(LayoutError::LbaOverflow { first_lba: u64::MAX, blocks: 2 }));
    }

    #[test]
    fn every_4k_chunk_of_a_large_block_has_its_own_pattern() {
        let mut block = vec![0u8; 8192];
        fill_block(&mut block, &tag(8192)).expect("one block");
        assert_ne!(block[64..4096], block[4096 + 64..8192]);
    }

    #[test]
    fn a_header_of_another_block_size_is_recognised_as_such() {
        let mut block = vec![0u8; 4096];
        fill_block(&mut block, &tag(4096)).expect("one block");
        assert_eq!(read_header(&block[..512]), HeaderRead::OtherSize(tag(4096)));
    }

    #[test]
    fn a_corrupt_header_is_not_decoded() {
        let mut block = vec![0u8; 512];
        fill_block(&mut block, &tag(512)).expect("one block");
        block[20] ^= 1;
        assert_eq!(read_header(&block), HeaderRead::Corrupt);
        block[20] ^= 1;
        block[53] = 1;
        assert_eq!(read_header(&block), HeaderRead::Corrupt);
        assert_eq!(read_header(&block[..40]), HeaderRead::NoMagic);
        assert_eq!(read_header(&[0u8; 512]), HeaderRead::NoMagic);
    }

    #[test]
    fn a_body_is_recognised_as_keystream_xor_a_key() {
        let mut block = vec![0u8; 4096];
        fill_block(&mut block, &tag(4096)).expect("one block");
        assert!(follows_keystream(&block, 64));
        assert!(follows_keystream(&block, 1001));
        block[4000] ^= 0x80;
        assert!(!follows_keystream(&block, 64));
        assert!(!follows_keystream(&block, 4096));
    }
}
