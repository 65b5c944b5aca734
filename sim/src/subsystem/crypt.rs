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
//! The XTS mode (IEEE 1619) is written here over the `aes` crate's bulk block calls
//! rather than taken from `xts-mode`: that crate encrypts one 16-byte block at a time,
//! which keeps AES-NI from pipelining and made a 4 KiB read ~20× slower
//! (`cargo bench -p nvme-sim --bench crypt`). The tests check this code against
//! `xts-mode`, which stays the reference.

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
}

/// One AES block.
type Block = Array<u8, aes::cipher::consts::U16>;

impl Crypt {
    pub fn new(key: Key, unit: usize) -> Crypt {
        let (k1, k2) = key.0.split_at(32);
        let cipher = |k: &[u8]| Aes256::new(&Array::try_from(k).expect("32-byte half of a 64-byte key"));
        Crypt { data: cipher(k1), tweak: cipher(k2), key, unit }
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

    /// XTS over each data unit (the last may be shorter, a multiple of 16 bytes, as the
    /// media's end can be): the unit index (little-endian) encrypted under key 2 is the
    /// first tweak, each next block's tweak is the previous one times α in GF(2^128);
    /// every block is XORed with its tweak, run through AES under key 1, XORed again.
    fn xts(&self, at: u64, units: &mut [u8], encrypt: bool) {
        let first = at / self.unit as u64;
        for (k, unit) in units.chunks_mut(self.unit).enumerate() {
            let (blocks, rest) = Block::slice_as_chunks_mut(unit);
            debug_assert!(rest.is_empty(), "data units are multiples of 16 bytes");
            let mut t = Block::from(((first + k as u64) as u128).to_le_bytes());
            self.tweak.encrypt_block(&mut t);
            let t0 = u128::from_le_bytes(t.into());
            // The tweaks are made again for the second XOR: doubling is cheaper than keeping them.
            xor_tweaks(blocks, t0);
            if encrypt {
                self.data.encrypt_blocks(blocks);
            } else {
                self.data.decrypt_blocks(blocks);
            }
            xor_tweaks(blocks, t0);
        }
    }
}

/// XORs block j with the j-th tweak from `t`: t × α^j in GF(2^128) (little-endian).
fn xor_tweaks(blocks: &mut [Block], mut t: u128) {
    for b in blocks {
        let x = u128::from_le_bytes(b.0) ^ t;
        b.0 = x.to_le_bytes();
        t = (t << 1) ^ ((t >> 127) * 0x87);
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
        let ours = Crypt::new(key, 4096);
        let plain: Vec<u8> = (0..3 * 4096).map(|i| (i * 31 % 256) as u8).collect();
        let mut a = plain.clone();
        ours.encrypt(5 * 4096, &mut a);
        let mut b = plain.clone();
        reference.encrypt_area(&mut b, 4096, 5, get_tweak_default);
        assert!(a == b, "same ciphertext as xts-mode for units 5, 6, 7");
        ours.decrypt(5 * 4096, &mut a);
        assert!(a == plain);
    }
}
