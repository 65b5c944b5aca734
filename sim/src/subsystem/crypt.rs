//! Media encryption: each namespace's data is stored as AES-256-XTS ciphertext under a
//! key of its own (the datasheets' "AES-256 data encryption"), with the data unit the
//! namespace's LBA data size and the unit's index on the media as the tweak (the LBA,
//! unless a quirk misaddresses LBAs). A cryptographic erase (Format NVM SES 010b,
//! Sanitize Crypto Erase) replaces the key: every stored block then decrypts to noise,
//! so the erase is real and a quirk that skips it leaves real plaintext.
//!
//! Keys come from a seeded generator ([`crate::rng::Rng`]): the simulator never reads
//! a system RNG, so runs repeat.
//!
//! The XTS mode (IEEE 1619) is written here rather than taken from `xts-mode`: that
//! crate encrypts one 16-byte block at a time, which keeps AES-NI from pipelining and
//! made a 4 KiB read ~20× slower (`cargo bench -p nvme-sim --bench crypt`). On x86-64
//! with AES-NI it runs in one pass per data unit ([`aesni`]); elsewhere over the `aes`
//! crate's bulk block calls. The tests check both against `xts-mode`, which stays the
//! reference.

#[cfg(target_arch = "x86_64")]
mod aesni;

use aes::cipher::{Array, BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};
use aes::Aes256;

use crate::rng::Rng;

/// A 512-bit XTS key (two AES-256 keys: data and tweak).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Key([u8; 64]);

impl Key {
    /// The key a namespace's `generation`-th key of drive `seed` is.
    pub fn derive(seed: u64, generation: u64) -> Key {
        let mut rng = Rng::new(seed ^ generation.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut key = [0u8; 64];
        for word in key.chunks_exact_mut(8) {
            word.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        Key(key)
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

/// AES-256-XTS over data units of `unit` bytes (a power of two, 512 to 64 KiB).
pub struct Crypt {
    /// Key 1: encrypts the data.
    data: Aes256,
    /// Key 2: encrypts the unit index into the first tweak.
    tweak: Aes256,
    key: Key,
    unit: usize,
    /// The same two keys expanded for AES-NI, where the processor has it.
    #[cfg(target_arch = "x86_64")]
    fast: Option<(aesni::Keys, aesni::Keys)>,
}

/// One AES block.
type Block = Array<u8, aes::cipher::consts::U16>;

impl Crypt {
    pub fn new(key: Key, unit: usize) -> Crypt {
        let (k1, k2) = key.0.split_at(32);
        let cipher = |k: &[u8]| Aes256::new(&Array::try_from(k).expect("32-byte half of a 64-byte key"));
        Crypt {
            data: cipher(k1),
            tweak: cipher(k2),
            key,
            unit,
            #[cfg(target_arch = "x86_64")]
            fast: half(k1).and_then(|k1| Some((aesni::Keys::new(&k1)?, aesni::Keys::new(&half(k2)?)?))),
        }
    }

    /// [`Crypt::new`] over the `aes` crate alone, as on a processor without AES-NI.
    pub fn portable(key: Key, unit: usize) -> Crypt {
        #[allow(unused_mut)]
        let mut c = Crypt::new(key, unit);
        #[cfg(target_arch = "x86_64")]
        {
            c.fast = None;
        }
        c
    }

    pub fn key(&self) -> Key {
        self.key
    }

    pub fn unit(&self) -> usize {
        self.unit
    }

    /// The data units covering `within .. within + n` of a chunk (`chunk_len` bytes):
    /// the unit-aligned range around it.
    pub fn units_around(&self, within: usize, n: usize, chunk_len: usize) -> (usize, usize) {
        let lo = within / self.unit * self.unit;
        let hi = (within + n).div_ceil(self.unit) * self.unit;
        (lo, hi.min(chunk_len))
    }

    /// Encrypts `units` in place: whole data units starting at media byte `at`.
    pub fn encrypt(&self, at: u64, units: &mut [u8]) {
        self.xts(at, units, true);
    }

    /// Decrypts `units` in place: whole data units starting at media byte `at`.
    pub fn decrypt(&self, at: u64, units: &mut [u8]) {
        self.xts(at, units, false);
    }

    /// Decrypts whole data units starting at media byte `at` from `src` into `dst` (the
    /// same length): a read's copy out of the media and its decryption in one pass.
    pub fn decrypt_into(&self, at: u64, src: &[u8], dst: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        if let Some((data, tweak)) = &self.fast {
            let first = at / self.unit as u64;
            for (k, (s, d)) in src.chunks(self.unit).zip(dst.chunks_mut(self.unit)).enumerate() {
                data.xts_into(tweak.encrypt_block(((first + k as u64) as u128).to_le_bytes()), s, d, false);
            }
            return;
        }
        dst.copy_from_slice(src);
        self.decrypt(at, dst);
    }

    /// XTS over each data unit (the last may be shorter, a multiple of 16 bytes, as the
    /// media's end can be): the unit index (little-endian) encrypted under key 2 is the
    /// first tweak, each next block's tweak is the previous one times α in GF(2^128);
    /// every block is XORed with its tweak, run through AES under key 1, XORed again.
    /// The tweaks of up to [`BATCH`] blocks are made once, in eight independent chains,
    /// so that neither XOR pass waits on the serial doubling.
    fn xts(&self, at: u64, units: &mut [u8], encrypt: bool) {
        let first = at / self.unit as u64;
        #[cfg(target_arch = "x86_64")]
        if let Some((data, tweak)) = &self.fast {
            for (k, unit) in units.chunks_mut(self.unit).enumerate() {
                let t = tweak.encrypt_block(((first + k as u64) as u128).to_le_bytes());
                data.xts(t, unit, encrypt);
            }
            return;
        }
        let mut tweaks = [0u128; BATCH];
        for (k, unit) in units.chunks_mut(self.unit).enumerate() {
            let (blocks, rest) = Block::slice_as_chunks_mut(unit);
            debug_assert!(rest.is_empty(), "data units are multiples of 16 bytes");
            let mut t = Block::from(((first + k as u64) as u128).to_le_bytes());
            self.tweak.encrypt_block(&mut t);
            let mut next = u128::from_le_bytes(t.into());
            for batch in blocks.chunks_mut(BATCH) {
                let tweaks = &mut tweaks[..batch.len()];
                next = fill_tweaks(tweaks, next);
                xor_tweaks(batch, tweaks);
                if encrypt {
                    self.data.encrypt_blocks(batch);
                } else {
                    self.data.decrypt_blocks(batch);
                }
                xor_tweaks(batch, tweaks);
            }
        }
    }
}

/// A 32-byte half of the XTS key.
#[cfg(target_arch = "x86_64")]
fn half(k: &[u8]) -> Option<[u8; 32]> {
    k.try_into().ok()
}

/// Blocks whose tweaks are made at a time: 4 KiB of tweaks, on the stack.
const BATCH: usize = 256;

/// `t` × α in GF(2^128) (XTS's little-endian convention, reduction x^128 = x^7 + x^2 + x + 1).
fn times_alpha(t: u128) -> u128 {
    (t << 1) ^ ((t >> 127) * 0x87)
}

/// `t` × α^8: the byte shifted out, times 87h carry-less (x^7 + x^2 + x + 1), folds back.
fn times_alpha8(t: u128) -> u128 {
    let h = (t >> 120) as u32;
    (t << 8) ^ (h ^ (h << 1) ^ (h << 2) ^ (h << 7)) as u128
}

/// Fills `tweaks[j]` with `t` × α^j; returns the tweak of the block after them.
fn fill_tweaks(tweaks: &mut [u128], t: u128) -> u128 {
    let mut x = t;
    for tweak in tweaks.iter_mut().take(8) {
        *tweak = x;
        x = times_alpha(x);
    }
    for j in 8..tweaks.len() {
        tweaks[j] = times_alpha8(tweaks[j - 8]);
    }
    tweaks.last().map_or(t, |&last| times_alpha(last))
}

/// XORs each block with its tweak.
fn xor_tweaks(blocks: &mut [Block], tweaks: &[u128]) {
    for (b, t) in blocks.iter_mut().zip(tweaks) {
        b.0 = (u128::from_le_bytes(b.0) ^ t).to_le_bytes();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ciphertext_depends_on_key_and_unit_index() {
        let c = Crypt::new(Key::derive(7, 0), 512);
        let plain = vec![0x5Au8; 1024];
        let mut a = plain.clone();
        c.encrypt(0, &mut a);
        assert_ne!(a[..512], plain[..512]);
        assert_ne!(a[..512], a[512..], "each unit has its own tweak");
        let mut b = a.clone();
        c.decrypt(0, &mut b);
        assert_eq!(b, plain);
        let other = Crypt::new(Key::derive(7, 1), 512);
        let mut c2 = a.clone();
        other.decrypt(0, &mut c2);
        assert_ne!(c2[..512], plain[..512], "another key decrypts to noise");
    }

    #[test]
    fn the_mode_is_xts_as_the_xts_mode_crate_computes_it() {
        use xts_mode::{get_tweak_default, Xts128};
        let key = Key::derive(3, 5);
        let (k1, k2) = key.0.split_at(32);
        let cipher = |k: &[u8]| Aes256::new(&Array::try_from(k).unwrap());
        let reference = Xts128::new(cipher(k1), cipher(k2));
        for ours in [Crypt::new(key, 4096), Crypt::portable(key, 4096)] {
            let plain: Vec<u8> = (0..3 * 4096).map(|i| (i * 31 % 256) as u8).collect();
            let mut a = plain.clone();
            ours.encrypt(5 * 4096, &mut a);
            let mut b = plain.clone();
            reference.encrypt_area(&mut b, 4096, 5, get_tweak_default);
            assert!(a == b, "same ciphertext as xts-mode for units 5, 6, 7");
            let mut c = vec![0u8; a.len()];
            ours.decrypt_into(5 * 4096, &a, &mut c);
            assert!(c == plain, "decrypted out of place");
            ours.decrypt(5 * 4096, &mut a);
            assert!(a == plain);
        }
    }

    /// Units of more blocks than a batch of tweaks (64 KiB: 4096 blocks) and of fewer
    /// than one chain's eight (a 112-byte last unit at the media's end).
    #[test]
    fn units_longer_than_a_batch_and_shorter_than_the_chains_match_xts_mode() {
        use xts_mode::{get_tweak_default, Xts128};
        let key = Key::derive(9, 2);
        let (k1, k2) = key.0.split_at(32);
        let cipher = |k: &[u8]| Aes256::new(&Array::try_from(k).unwrap());
        let reference = Xts128::new(cipher(k1), cipher(k2));
        let plain: Vec<u8> = (0..2 * 65536 + 112).map(|i| (i * 7 % 251) as u8).collect();
        let mut b = plain.clone();
        reference.encrypt_area(&mut b[..2 * 65536], 65536, 3, get_tweak_default);
        reference.encrypt_sector(&mut b[2 * 65536..], get_tweak_default(5));
        for ours in [Crypt::new(key, 65536), Crypt::portable(key, 65536)] {
            let mut a = plain.clone();
            ours.encrypt(3 * 65536, &mut a);
            assert!(a == b, "same ciphertext as xts-mode for units 3, 4 and a short 5");
            ours.decrypt(3 * 65536, &mut a);
            assert!(a == plain);
        }
    }

    /// The AES-NI path is taken on this machine where it can be (else the tests above
    /// would hold the portable path twice), and its round keys are the `aes` crate's.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn aes_ni_is_used_where_the_processor_has_it_and_its_blocks_are_the_aes_crates() {
        let c = Crypt::new(Key::derive(4, 4), 512);
        assert_eq!(c.fast.is_some(), aesni::available());
        if let Some((data, _)) = &c.fast {
            let mut block = Block::from([0x3Cu8; 16]);
            c.data.encrypt_block(&mut block);
            assert_eq!(data.encrypt_block([0x3C; 16]), <[u8; 16]>::from(block));
        }
    }

    #[test]
    fn alpha_to_the_eighth_is_eight_doublings() {
        let mut t: u128 = 0xF0E1_D2C3_B4A5_9687_7869_5A4B_3C2D_1E0F;
        for _ in 0..100 {
            let eight = (0..8).fold(t, |x, _| times_alpha(x));
            assert_eq!(times_alpha8(t), eight);
            t = times_alpha(t ^ eight.rotate_left(13));
        }
    }
}
