//! Host memory reachable by DMA: a region of this process's memory with the bus
//! address the controller uses for its first byte.
//!
//! The memory is shared with the controller (the simulated drive's thread of control,
//! or QEMU through a shared file), so this type hands out copies and atomic loads,
//! never long-lived references, exactly as a driver treats DMA memory.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("DMA to {addr:#x}+{len:#x} falls outside host memory {base:#x}+{size:#x}")]
pub struct DmaError {
    pub addr: u64,
    pub len: usize,
    pub base: u64,
    pub size: usize,
}

enum Backing {
    Heap(Layout),
    /// Kept only so the mapping lives as long as the region; unmapped on drop.
    #[allow(dead_code)]
    Mapped(memmap2::MmapRaw),
}

/// A contiguous region of host memory at bus addresses `base .. base + len`.
pub struct DmaRegion {
    ptr: NonNull<u8>,
    len: usize,
    base: u64,
    backing: Backing,
}

// SAFETY: the region is plain memory; all access goes through raw-pointer copies and
// atomics, as DMA memory shared with a device is accessed.
unsafe impl Send for DmaRegion {}
unsafe impl Sync for DmaRegion {}

impl DmaRegion {
    /// Zeroed, page-aligned memory of this process, seen by the device at `base`.
    pub fn heap(len: usize, base: u64) -> Self {
        assert!(len > 0 && len.is_multiple_of(4096), "DMA region length must be whole 4 KiB pages");
        let layout = Layout::from_size_align(len, 4096).expect("page-aligned layout");
        // SAFETY: layout has a non-zero size.
        let ptr =
            NonNull::new(unsafe { alloc_zeroed(layout) }).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        DmaRegion { ptr, len, base, backing: Backing::Heap(layout) }
    }

    /// A mapping of a file shared with the device (QEMU's guest RAM), seen at `base`.
    pub fn mapped(map: memmap2::MmapRaw, base: u64) -> Self {
        let len = map.len();
        let ptr = NonNull::new(map.as_mut_ptr()).expect("mmap never returns null");
        DmaRegion { ptr, len, base, backing: Backing::Mapped(map) }
    }

    /// Bus address of the first byte.
    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn offset(&self, addr: u64, len: usize) -> Result<usize, DmaError> {
        let err = DmaError { addr, len, base: self.base, size: self.len };
        let off = addr.checked_sub(self.base).ok_or(err.clone())?;
        let end = off.checked_add(len as u64).ok_or(err.clone())?;
        if end > self.len as u64 {
            return Err(err);
        }
        Ok(off as usize)
    }

    /// Copies `buf.len()` bytes at bus address `addr` into `buf`.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let off = self.offset(addr, buf.len())?;
        // SAFETY: bounds checked above; the destination is a distinct Rust buffer.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    /// Copies `data` to bus address `addr`.
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let off = self.offset(addr, data.len())?;
        // SAFETY: bounds checked above; the source is a distinct Rust buffer.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(off), data.len()) };
        Ok(())
    }

    /// Sets `len` bytes at `addr` to `byte`.
    pub fn fill(&self, addr: u64, len: usize, byte: u8) -> Result<(), DmaError> {
        let off = self.offset(addr, len)?;
        // SAFETY: bounds checked above.
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr().add(off), byte, len) };
        Ok(())
    }

    /// Copies `len` bytes from bus address `from` to bus address `to` (regions may overlap).
    pub fn copy_within(&self, from: u64, to: u64, len: usize) -> Result<(), DmaError> {
        let src = self.offset(from, len)?;
        let dst = self.offset(to, len)?;
        // SAFETY: both ranges checked above; `copy` permits overlap.
        unsafe { std::ptr::copy(self.ptr.as_ptr().add(src), self.ptr.as_ptr().add(dst), len) };
        Ok(())
    }

    /// Reads a spec structure at `addr`.
    pub fn read_obj<T: zerocopy::FromBytes + zerocopy::IntoBytes>(&self, addr: u64) -> Result<T, DmaError> {
        let mut value = T::new_zeroed();
        self.read(addr, value.as_mut_bytes())?;
        Ok(value)
    }

    /// Writes a spec structure at `addr`.
    pub fn write_obj<T: zerocopy::IntoBytes + zerocopy::Immutable>(
        &self,
        addr: u64,
        value: &T,
    ) -> Result<(), DmaError> {
        self.write(addr, value.as_bytes())
    }

    /// Loads the 16-bit word at `addr` with acquire ordering: how a driver polls a
    /// completion entry's phase tag, or a device reads a doorbell shadow.
    pub fn load_u16_acquire(&self, addr: u64) -> Result<u16, DmaError> {
        let off = self.offset(addr, 2)?;
        if off % 2 != 0 {
            return Err(DmaError { addr, len: 2, base: self.base, size: self.len });
        }
        // SAFETY: in bounds and 2-byte aligned (the region is page aligned).
        let atomic = unsafe { AtomicU16::from_ptr(self.ptr.as_ptr().add(off) as *mut u16) };
        Ok(atomic.load(Ordering::Acquire))
    }

    /// Runs `f` over the bytes at `addr .. addr + len` without copying them out.
    ///
    /// For hot paths (data verification). The device must not be writing that range
    /// meanwhile; a driver only calls this on a buffer whose command has completed.
    pub fn with_slice<R>(&self, addr: u64, len: usize, f: impl FnOnce(&[u8]) -> R) -> Result<R, DmaError> {
        let off = self.offset(addr, len)?;
        // SAFETY: in bounds; by this method's contract nothing writes the range meanwhile.
        let slice = unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(off), len) };
        Ok(f(slice))
    }

    /// Runs `f` over the bytes at `addr .. addr + len` mutably, without copying.
    ///
    /// Same contract as [`Self::with_slice`]: nobody else touches the range meanwhile.
    pub fn with_slice_mut<R>(&self, addr: u64, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> Result<R, DmaError> {
        let off = self.offset(addr, len)?;
        // SAFETY: in bounds; by this method's contract nothing else touches the range.
        let slice = unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(off), len) };
        Ok(f(slice))
    }
}

impl Drop for DmaRegion {
    fn drop(&mut self) {
        if let Backing::Heap(layout) = self.backing {
            // SAFETY: allocated in `heap` with this layout.
            unsafe { dealloc(self.ptr.as_ptr(), layout) };
        }
        // A mapped region is unmapped when its MmapRaw drops.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_stay_inside_the_region() {
        let r = DmaRegion::heap(8192, 0x10_0000);
        r.write(0x10_0ffe, &[1, 2, 3, 4]).unwrap();
        let mut b = [0u8; 4];
        r.read(0x10_0ffe, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3, 4]);
        assert!(r.read(0xfffff, &mut b).is_err());
        assert!(r.write(0x10_1ffe, &b).is_err());
        assert!(r.read(u64::MAX - 1, &mut b).is_err());
        assert_eq!(r.load_u16_acquire(0x10_1000).unwrap(), 0x0403);
    }
}
