//! Host memory for the driver: a page allocator over the transport's DMA region.
//!
//! Queues, PRP lists and data buffers all come from here, in whole 4 KiB pages (the
//! memory page size the driver selects, CC.MPS = 0). Allocations are contiguous in bus
//! address space, so a buffer of any length is described by consecutive PRP entries.
//! Bus address 0 is never handed out: a controller reading a zero pointer is a bug
//! nvtest wants to see as such, not as a valid buffer.

use crate::device::DeviceError;

/// The memory page size the driver uses (CC.MPS = 0: 2 ^ 12 bytes).
pub const PAGE_SIZE: usize = 4096;

/// A run of whole pages of host memory, at a bus address the controller uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaBuf {
    /// Bus address of the first byte (page aligned).
    pub addr: u64,
    /// Length in bytes (a multiple of [`PAGE_SIZE`]).
    pub len: usize,
}

impl DmaBuf {
    pub fn pages(&self) -> usize {
        self.len / PAGE_SIZE
    }
}

/// First-fit allocator of page runs, with neighbouring free runs merged on free.
pub struct PageAllocator {
    /// Bus address of page 0.
    first: u64,
    total_pages: usize,
    /// Free runs `(first page, page count)`, sorted by page and never adjacent.
    free: Vec<(usize, usize)>,
}

impl PageAllocator {
    /// Manages the whole pages of `base .. base + len` (a DMA region).
    pub fn new(base: u64, len: usize) -> Self {
        let page = PAGE_SIZE as u64;
        let mut first = base.div_ceil(page) * page;
        if first == 0 {
            first = page;
        }
        let end = base.saturating_add(len as u64);
        let total_pages = if end > first { ((end - first) / page) as usize } else { 0 };
        let free = if total_pages > 0 { vec![(0, total_pages)] } else { Vec::new() };
        PageAllocator { first, total_pages, free }
    }

    /// Bytes not allocated.
    pub fn free_bytes(&self) -> usize {
        self.free.iter().map(|&(_, n)| n).sum::<usize>() * PAGE_SIZE
    }

    /// Bytes managed.
    pub fn total_bytes(&self) -> usize {
        self.total_pages * PAGE_SIZE
    }

    /// Allocates at least `bytes` (at least one page), page aligned and contiguous.
    /// The memory is not cleared.
    pub fn alloc(&mut self, bytes: usize) -> Result<DmaBuf, DeviceError> {
        let pages = bytes.div_ceil(PAGE_SIZE).max(1);
        let Some(i) = self.free.iter().position(|&(_, n)| n >= pages) else {
            let largest = self.free.iter().map(|&(_, n)| n).max().unwrap_or(0);
            return Err(DeviceError::Driver(format!(
                "host memory exhausted: {bytes} bytes asked, {} free of {} (largest free run {} bytes)",
                self.free_bytes(),
                self.total_bytes(),
                largest * PAGE_SIZE
            )));
        };
        let (start, n) = self.free[i];
        if n == pages {
            self.free.remove(i);
        } else {
            self.free[i] = (start + pages, n - pages);
        }
        Ok(DmaBuf { addr: self.first + (start * PAGE_SIZE) as u64, len: pages * PAGE_SIZE })
    }

    /// Returns a buffer from [`Self::alloc`]. A buffer that is not wholly allocated
    /// (already freed, or never from this allocator) is refused with an error and
    /// nothing changes.
    pub fn free(&mut self, buf: DmaBuf) -> Result<(), DeviceError> {
        let refuse = || DeviceError::Driver(format!("freeing {:#x}+{:#x}, which is not allocated", buf.addr, buf.len));
        if buf.addr < self.first
            || !(buf.addr - self.first).is_multiple_of(PAGE_SIZE as u64)
            || !buf.len.is_multiple_of(PAGE_SIZE)
        {
            return Err(refuse());
        }
        let start = ((buf.addr - self.first) / PAGE_SIZE as u64) as usize;
        let pages = buf.pages();
        if pages == 0 || start.checked_add(pages).is_none_or(|end| end > self.total_pages) {
            return Err(refuse());
        }
        // Index of the first free run after `start`.
        let i = self.free.partition_point(|&(s, _)| s < start);
        let overlaps_prev = i > 0 && self.free[i - 1].0 + self.free[i - 1].1 > start;
        let overlaps_next = i < self.free.len() && self.free[i].0 < start + pages;
        if overlaps_prev || overlaps_next {
            return Err(refuse());
        }
        let joins_prev = i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == start;
        let joins_next = i < self.free.len() && self.free[i].0 == start + pages;
        match (joins_prev, joins_next) {
            (true, true) => {
                self.free[i - 1].1 += pages + self.free[i].1;
                self.free.remove(i);
            }
            (true, false) => self.free[i - 1].1 += pages,
            (false, true) => self.free[i] = (start, pages + self.free[i].1),
            (false, false) => self.free.insert(i, (start, pages)),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_page_aligned_contiguous_and_never_at_zero() {
        let mut a = PageAllocator::new(0, 16 * PAGE_SIZE);
        let b = a.alloc(1).unwrap();
        assert_eq!(b, DmaBuf { addr: 0x1000, len: PAGE_SIZE });
        assert_eq!(a.total_bytes(), 15 * PAGE_SIZE);
        let c = a.alloc(PAGE_SIZE + 1).unwrap();
        assert_eq!(c, DmaBuf { addr: 0x2000, len: 2 * PAGE_SIZE });
    }

    #[test]
    fn unaligned_region_base_is_rounded_up() {
        let a = PageAllocator::new(0x1_0000_0800, 4 * PAGE_SIZE);
        assert_eq!(a.total_bytes(), 3 * PAGE_SIZE);
    }

    #[test]
    fn freed_runs_merge_and_are_reused() {
        let mut a = PageAllocator::new(0x1_0000_0000, 8 * PAGE_SIZE);
        let x = a.alloc(2 * PAGE_SIZE).unwrap();
        let y = a.alloc(3 * PAGE_SIZE).unwrap();
        let z = a.alloc(3 * PAGE_SIZE).unwrap();
        assert!(a.alloc(1).is_err());
        a.free(x).unwrap();
        a.free(z).unwrap();
        a.free(y).unwrap();
        assert_eq!(a.free_bytes(), 8 * PAGE_SIZE);
        // One run again: the whole region fits one allocation.
        assert_eq!(a.alloc(8 * PAGE_SIZE).unwrap().addr, 0x1_0000_0000);
    }

    #[test]
    fn double_and_foreign_frees_are_refused() {
        let mut a = PageAllocator::new(0x10_0000, 8 * PAGE_SIZE);
        let x = a.alloc(PAGE_SIZE).unwrap();
        a.free(x).unwrap();
        assert!(a.free(x).is_err());
        assert!(a.free(DmaBuf { addr: 0x10, len: PAGE_SIZE }).is_err());
        assert!(a.free(DmaBuf { addr: 0x10_0000, len: 100 * PAGE_SIZE }).is_err());
        assert_eq!(a.free_bytes(), 8 * PAGE_SIZE);
    }

    #[test]
    fn exhaustion_is_an_error_naming_the_sizes() {
        let mut a = PageAllocator::new(0x10_0000, 2 * PAGE_SIZE);
        let e = a.alloc(3 * PAGE_SIZE).unwrap_err().to_string();
        assert!(e.contains("12288 bytes asked"), "{e}");
    }
}
