//! Data judgement: the blocks nvtest writes, the host's map of what every block must hold,
//! and the judgement of every block read back.
//!
//! - [`block`]: the self-describing block format; [`fill_block`] / [`fill_blocks`] write it,
//!   [`decode_header`] reads a header back.
//! - [`map`]: [`HostMap`], per namespace a [`NamespaceMap`] of LBA ranges, each
//!   [`Expectation::Written`] (generation, seed), `Deallocated` (with what the blocks held
//!   before, [`Previous`]), `Zeroes` or `Unknown`.
//! - [`expectation`]: [`Expectation`] and [`Previous`], what the map records and the
//!   judgement checks against.
//! - [`judge`]: [`judge_block`] and [`judge_range`] compare exactly and, on a mismatch,
//!   say what the block holds instead ([`Mismatch`], one sentence via `Display`).
//!
//! # Block format
//!
//! Every block nvtest writes is generated from its [`BlockTag`]: namespace, LBA, write
//! generation, seed and block size. Block sizes are multiples of 8 bytes, at least 64.
//! All integers are little-endian.
//!
//! | bytes   | field                                                              |
//! |---------|--------------------------------------------------------------------|
//! | 0..8    | magic `"nvtestB1"`                                                 |
//! | 8..12   | NSID (u32)                                                         |
//! | 12..16  | block size in bytes (u32)                                          |
//! | 16..24  | write generation (u64)                                             |
//! | 24..32  | seed (u64)                                                         |
//! | 32..40  | LBA (u64)                                                          |
//! | 40..48  | reserved, zero                                                     |
//! | 48..52  | CRC-32C (Castagnoli, as iSCSI: reflected, init and xorout `!0`) of bytes 0..48 |
//! | 52..64  | reserved, zero                                                     |
//! | 64..end | body: word *i* (8 bytes, counted from the block's start, *i* ≥ 8) is `K[i mod 512] ^ C[i div 512]` |
//!
//! - `mix` is the SplitMix64 finaliser: `z ^= z >> 30; z *= 0xbf58476d1ce4e5b9;
//!   z ^= z >> 27; z *= 0x94d049bb133111eb; z ^= z >> 31` (a bijection on u64).
//! - `K` is a fixed 4 KiB keystream: the first 512 outputs of SplitMix64 from state 0,
//!   `K[j] = mix((j + 1) · 0x9e3779b97f4a7c15)`.
//! - The block key is `B = mix(mix(mix(mix(seed ^ 0x6e76746573742d64) ^ (nsid | size << 32)) ^
//!   generation) ^ lba)`. Each 4 KiB chunk of the block has its own key: `C[0] = B` (all
//!   of a block up to 4 KiB) and `C[c] = mix(B + c · 0x9e3779b97f4a7c15)` for c ≥ 1.
//!
//! Every body word therefore depends on the whole tag. Because `mix` is a bijection, two
//! tags that differ in one field have different keys, so every body word differs, not only
//! the header: a block of another LBA, namespace, generation or run is always caught, and a
//! block whose header and body come from different writes (a torn write) too.
//!
//! # Speed
//!
//! Generating the body is one XOR per word against a 4 KiB table that stays in L1, which
//! the compiler vectorises (with AVX2 when the CPU has it, chosen at run time); the header
//! checksum of consecutive LBAs is updated rather than recomputed (CRC-32C is affine over
//! GF(2), so the change from one LBA to the next is one table entry); fills of 8 MiB or
//! more use non-temporal stores, as memset does. Filling and judging run at 60–100 % of
//! memset and read bandwidth (`cargo bench -p nvtest --bench data`), fastest on buffers
//! aligned to 64 bytes, as DMA buffers are.
//!
//! # Judgement
//!
//! A block the map records as written must match exactly. A Write Zeroes block (with or
//! without DEAC) reads as zeros. A block deallocated by Dataset Management reads as DLFEAT
//! says ([`DeallocatedRead`]: zeros, 0xFF bytes, or anything when not reported) **or**
//! exactly as the data written before it was deallocated: Dataset Management is advisory
//! (NVMe 1.4 Dataset Management command; Attribute – Deallocate: the NVM subsystem *may*
//! deallocate), so a controller that kept the data is right. Anything else is wrong (all
//! 0xFF bytes where DLFEAT promises zeroes, another generation, garbage). A deallocated
//! block whose earlier content nvtest does not know is not judged (a controller that kept
//! it returns data nvtest never saw), nor is an unknown block. [`judge_range`] counts the
//! deallocated blocks that kept their data ([`Judged::kept`]) so that a case can note it.

pub mod block;
pub mod expectation;
pub mod judge;
pub mod map;
mod wide;

#[cfg(test)]
mod properties;

pub use block::{decode_header, fill_block, fill_blocks, BlockSize, BlockTag, LayoutError, HEADER_LEN, MAGIC};
pub use expectation::{Expectation, Previous};
pub use judge::{judge_block, judge_range, run_holds, DeallocatedRead, Found, JudgeError, Judged, Mismatch, Rest};
pub use map::{HostMap, NamespaceMap, Segment, Segments};
