//! Media encryption: each namespace's data is stored as AES-256-XTS ciphertext under a
//! key of its own (the datasheets' "AES-256 data encryption"), with the data unit the
//! namespace's LBA data size and the unit's index on the media as the tweak (the LBA,
//! unless a quirk misaddresses LBAs). A cryptographic erase (Format NVM SES 010b,
//! Sanitize Crypto Erase) replaces the key: every stored block then decrypts to noise,
//! so the erase is real and a quirk that skips it leaves real plaintext.
//!
//! Keys come from a seeded generator ([`crate::rng::Rng`]): the simulator never reads
//! a system RNG, so runs repeat. The `aes` and `xts-mode` crates do the cipher.

use aes::cipher::{Array, KeyInit};
use aes::Aes256;
use xts_mode::{get_tweak_default, Xts128};

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

/// AES-256-XTS over data units of `unit` bytes (a power of two, 16 to 64 KiB).
pub struct Crypt {
    xts: Xts128<Aes256>,
    key: Key,
    unit: usize,
}

impl Crypt {
    pub fn new(key: Key, unit: usize) -> Crypt {
        let (k1, k2) = key.0.split_at(32);
        let cipher = |k: &[u8]| Aes256::new(&Array::try_from(k).expect("32-byte half of a 64-byte key"));
        Crypt { xts: Xts128::new(cipher(k1), cipher(k2)), key, unit }
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
        self.xts.encrypt_area(units, self.unit, (at / self.unit as u64) as u128, get_tweak_default);
    }

    /// Decrypts `units` in place: whole data units starting at media byte `at`.
    pub fn decrypt(&self, at: u64, units: &mut [u8]) {
        self.xts.decrypt_area(units, self.unit, (at / self.unit as u64) as u128, get_tweak_default);
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
}
