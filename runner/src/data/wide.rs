//! Running a data kernel compiled for the widest vectors the CPU has, chosen at run time.
//!
//! nvtest is built for the baseline x86-64 target (SSE2, 16-byte vectors); on a CPU with
//! AVX2 the fill and compare loops run twice as wide, which matters when the data is in
//! cache. The kernel is an `#[inline(always)]` closure: the compiler inlines it into a
//! function compiled with AVX2 enabled and vectorises it there.
//!
//! Large fills are written with non-temporal stores ([`store_line`]), as memset does.
//!
//! This is the data module's only `unsafe`: calling the AVX2 function after checking that
//! the CPU has AVX2, and the SSE2 store and fence intrinsics.

/// Runs `kernel`, compiled with AVX2 when the CPU supports it.
#[inline(always)]
pub(crate) fn with_wide_vectors<R>(kernel: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: `with_avx2` only needs AVX2, which the CPU has: checked just above.
        return unsafe { with_avx2(kernel) };
    }
    kernel()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn with_avx2<R>(kernel: impl FnOnce() -> R) -> R {
    kernel()
}

/// Writes one 64-byte line. If `STREAMING` and the line is 16-byte aligned, with
/// non-temporal stores (around the caches); call [`end_streaming`] after the last one.
#[inline(always)]
pub(crate) fn store_line<const STREAMING: bool>(line: &mut [[u8; 8]; 8], words: [u64; 8]) {
    #[cfg(target_arch = "x86_64")]
    if STREAMING {
        use std::arch::x86_64::{__m128i, _mm_set_epi64x, _mm_stream_si128};
        let at = line.as_mut_ptr().cast::<__m128i>();
        if at.is_aligned() {
            for (half, pair) in words.as_chunks::<2>().0.iter().enumerate() {
                let [low, high] = *pair;
                // SAFETY: `at` points to the 64 bytes of `line`, which this function may
                // write, and is 16-byte aligned (checked above); `half` < 4, so each store
                // writes 16 of those bytes. SSE2 is part of the x86-64 baseline. x86-64 is
                // little-endian, as the words must be.
                unsafe { _mm_stream_si128(at.add(half), _mm_set_epi64x(high as i64, low as i64)) };
            }
            return;
        }
    }
    *line = words.map(u64::to_le_bytes);
}

/// Orders the non-temporal stores before everything stored after it (a doorbell, a flag).
pub(crate) fn end_streaming() {
    // SAFETY: SFENCE is part of SSE, which every x86-64 CPU has.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_runs_once_and_its_result_is_returned() {
        let mut runs = 0;
        let result = with_wide_vectors(|| {
            runs += 1;
            (1..=10u64).sum::<u64>()
        });
        assert_eq!((result, runs), (55, 1));
    }
}
