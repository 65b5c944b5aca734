//! AES-256-XTS with the x86-64 AES instructions (AES-NI, and PCLMULQDQ for the
//! tweaks), used when the processor has them (checked when a key is made): each group
//! of eight blocks is loaded, XORed with its tweak, run through the fourteen rounds
//! interleaved, XORed again and stored, in one pass; the tweaks stay in vector
//! registers, each group's the previous group's times α^8.
//!
//! Why not the `aes` crate here: its bulk calls are as fast per AES round, but XTS over
//! them needs two more passes over the data for the tweaks, which cost as much as the
//! cipher itself on a 4 KiB unit (`cargo bench -p nvme-sim --bench crypt`). The `aes`
//! crate stays the cipher of every other processor, and the reference the tests hold
//! this code to (round keys, blocks) beside `xts-mode` (the mode).

use std::arch::x86_64::*;

/// The expanded keys of one AES-256 key: fourteen rounds, fifteen round keys, for
/// encryption and (equivalent inverse cipher) decryption.
#[derive(Clone, Copy)]
pub struct Keys {
    enc: [__m128i; 15],
    dec: [__m128i; 15],
}

/// Whether this processor has the instructions [`Keys`] needs.
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("aes")
        && std::arch::is_x86_feature_detected!("sse2")
        && std::arch::is_x86_feature_detected!("pclmulqdq")
}

impl Keys {
    /// The round keys of `key`; `None` where the processor lacks AES-NI.
    pub fn new(key: &[u8; 32]) -> Option<Keys> {
        // SAFETY: the instructions exist, checked just before.
        available().then(|| unsafe { expand(key) })
    }

    /// Encrypts one block (the first tweak, from the unit index).
    pub fn encrypt_block(&self, block: [u8; 16]) -> [u8; 16] {
        // SAFETY: a `Keys` exists only where `available()` held.
        unsafe { encrypt_one(&self.enc, block) }
    }

    /// XTS over `data` (whole 16-byte blocks) with first tweak `tweak`, in place.
    pub fn xts(&self, tweak: [u8; 16], data: &mut [u8], encrypt: bool) {
        let (len, p) = (data.len(), data.as_mut_ptr());
        // SAFETY: `p` is valid for reads and writes of `len` bytes.
        unsafe { self.xts_raw(tweak, p, p, len, encrypt) }
    }

    /// XTS of `src` into `dst` (the same length, whole 16-byte blocks).
    pub fn xts_into(&self, tweak: [u8; 16], src: &[u8], dst: &mut [u8], encrypt: bool) {
        assert_eq!(src.len(), dst.len(), "XTS keeps the length");
        // SAFETY: `src` is valid for reads and `dst` for writes of `len` bytes.
        unsafe { self.xts_raw(tweak, src.as_ptr(), dst.as_mut_ptr(), src.len(), encrypt) }
    }

    /// # Safety
    /// `src` valid for reads and `dst` for writes of `len` bytes; they are the same or
    /// do not overlap.
    unsafe fn xts_raw(&self, tweak: [u8; 16], src: *const u8, dst: *mut u8, len: usize, encrypt: bool) {
        debug_assert!(len.is_multiple_of(16));
        // SAFETY: a `Keys` exists only where `available()` held; the pointers as the caller
        // promises.
        unsafe {
            if encrypt {
                xts_blocks::<true>(&self.enc, tweak, src, dst, len)
            } else {
                xts_blocks::<false>(&self.dec, tweak, src, dst, len)
            }
        }
    }
}

#[target_feature(enable = "aes,sse2")]
fn expand(key: &[u8; 32]) -> Keys {
    // The AES-256 key schedule (FIPS 197 §5.2) with AESKEYGENASSIST: each step makes one
    // round key from the two before it.
    #[target_feature(enable = "sse2")]
    fn spread(x: __m128i) -> __m128i {
        // w0, w0^w1, w0^w1^w2, w0^w1^w2^w3
        let x = _mm_xor_si128(x, _mm_slli_si128::<4>(x));
        let x = _mm_xor_si128(x, _mm_slli_si128::<4>(x));
        _mm_xor_si128(x, _mm_slli_si128::<4>(x))
    }
    // SAFETY: 16 bytes read from each half of the 32-byte key.
    let (mut a, mut b) =
        unsafe { (_mm_loadu_si128(key.as_ptr().cast()), _mm_loadu_si128(key.as_ptr().add(16).cast())) };
    let mut enc = [a; 15];
    enc[1] = b;
    // Round keys 2i and 2i + 1 from the two before them; the last step makes key 14 alone.
    macro_rules! keys {
        ($i:expr, $rcon:expr) => {
            a = _mm_xor_si128(spread(a), _mm_shuffle_epi32::<0xFF>(_mm_aeskeygenassist_si128::<$rcon>(b)));
            enc[$i] = a;
        };
        ($i:expr, $rcon:expr, and_next) => {
            keys!($i, $rcon);
            b = _mm_xor_si128(spread(b), _mm_shuffle_epi32::<0xAA>(_mm_aeskeygenassist_si128::<0>(a)));
            enc[$i + 1] = b;
        };
    }
    keys!(2, 0x01, and_next);
    keys!(4, 0x02, and_next);
    keys!(6, 0x04, and_next);
    keys!(8, 0x08, and_next);
    keys!(10, 0x10, and_next);
    keys!(12, 0x20, and_next);
    keys!(14, 0x40);
    let mut dec = enc;
    dec[0] = enc[14];
    for r in 1..14 {
        dec[r] = _mm_aesimc_si128(enc[14 - r]);
    }
    dec[14] = enc[0];
    Keys { enc, dec }
}

#[target_feature(enable = "aes,sse2")]
fn encrypt_one(rk: &[__m128i; 15], block: [u8; 16]) -> [u8; 16] {
    // SAFETY: 16 bytes in, 16 bytes out.
    let mut x = unsafe { _mm_loadu_si128(block.as_ptr().cast()) };
    x = _mm_xor_si128(x, rk[0]);
    for k in &rk[1..14] {
        x = _mm_aesenc_si128(x, *k);
    }
    x = _mm_aesenclast_si128(x, rk[14]);
    let mut out = [0u8; 16];
    // SAFETY: 16 bytes written.
    unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), x) };
    out
}

/// The tweak times α in GF(2^128), little-endian: each 64-bit half shifted left by one,
/// bit 63 carried into bit 64 and bit 127 folded back as 87h.
#[target_feature(enable = "sse2")]
fn times_alpha(t: __m128i) -> __m128i {
    let signs = _mm_srai_epi32::<31>(t); // each dword's top bit, spread
    let carries = _mm_and_si128(_mm_shuffle_epi32::<0x13>(signs), _mm_set_epi32(0, 1, 0, 0x87));
    _mm_xor_si128(_mm_add_epi64(t, t), carries)
}

/// The tweak times α^8: shifted left by one byte, the byte shifted out folded back
/// times 87h, carry-less (PCLMULQDQ).
#[target_feature(enable = "sse2,pclmulqdq")]
fn times_alpha8(t: __m128i) -> __m128i {
    let out = _mm_srli_si128::<15>(t);
    let fold = _mm_clmulepi64_si128::<0x00>(out, _mm_set_epi64x(0, 0x87));
    _mm_xor_si128(_mm_slli_si128::<1>(t), fold)
}

/// One round of every block of a group: AESENC or AESDEC.
#[target_feature(enable = "aes,sse2")]
fn round<const ENCRYPT: bool>(x: __m128i, k: __m128i) -> __m128i {
    if ENCRYPT {
        _mm_aesenc_si128(x, k)
    } else {
        _mm_aesdec_si128(x, k)
    }
}

#[target_feature(enable = "aes,sse2")]
fn last_round<const ENCRYPT: bool>(x: __m128i, k: __m128i) -> __m128i {
    if ENCRYPT {
        _mm_aesenclast_si128(x, k)
    } else {
        _mm_aesdeclast_si128(x, k)
    }
}

/// Blocks in flight at once: enough to keep both AES units of a core busy through the
/// instructions' latency.
const LANES: usize = 8;

/// # Safety
/// AES-NI present; `src` valid for reads and `dst` for writes of `len` bytes (a multiple
/// of 16), the same or not overlapping. Each group is loaded whole before it is stored.
#[target_feature(enable = "aes,sse2,pclmulqdq")]
unsafe fn xts_blocks<const ENCRYPT: bool>(
    rk: &[__m128i; 15],
    tweak: [u8; 16],
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    let (src, dst): (*const __m128i, *mut __m128i) = (src.cast(), dst.cast());
    let blocks = len / 16;
    // SAFETY: 16 bytes read.
    let mut t = unsafe { _mm_loadu_si128(tweak.as_ptr().cast()) };
    let mut at = 0;
    // The group's tweaks: t × α^k; each next group's are these times α^8, eight chains
    // side by side rather than one chain through every block of the unit.
    let mut tw = [t; LANES];
    for k in 1..LANES {
        tw[k] = times_alpha(tw[k - 1]);
    }
    while at + LANES <= blocks {
        // The round keys read from memory in each group (as operands of the AES
        // instructions): held in registers beside the eight blocks they made the
        // compiler serialise the blocks' rounds for want of registers.
        let rk = std::hint::black_box(rk);
        // SAFETY: blocks `at .. at + LANES` lie inside both buffers; unaligned accesses.
        let mut x: [__m128i; LANES] = std::array::from_fn(|k| {
            _mm_xor_si128(_mm_xor_si128(unsafe { _mm_loadu_si128(src.add(at + k)) }, tw[k]), rk[0])
        });
        // Round by round over the whole group, written out: as a loop over the keys the
        // compiler ran each block's fourteen rounds one after another, which left the
        // AES units waiting on each instruction's latency.
        macro_rules! rounds {
            ($($r:literal)*) => {$(
                let key = rk[$r];
                for v in &mut x {
                    *v = round::<ENCRYPT>(*v, key);
                }
            )*};
        }
        rounds!(1 2 3 4 5 6 7 8 9 10 11 12 13);
        for k in 0..LANES {
            let y = _mm_xor_si128(last_round::<ENCRYPT>(x[k], rk[14]), tw[k]);
            // SAFETY: as above.
            unsafe { _mm_storeu_si128(dst.add(at + k), y) };
        }
        for v in &mut tw {
            *v = times_alpha8(*v);
        }
        t = tw[0];
        at += LANES;
    }
    while at < blocks {
        // SAFETY: block `at` lies inside both buffers.
        let mut x = _mm_xor_si128(_mm_xor_si128(unsafe { _mm_loadu_si128(src.add(at)) }, t), rk[0]);
        for key in &rk[1..14] {
            x = round::<ENCRYPT>(x, *key);
        }
        let y = _mm_xor_si128(last_round::<ENCRYPT>(x, rk[14]), t);
        // SAFETY: as above.
        unsafe { _mm_storeu_si128(dst.add(at), y) };
        t = times_alpha(t);
        at += 1;
    }
}
