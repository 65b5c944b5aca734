//! Building the data pointer of a command from PRP entries and lists (NVMe 1.4 §4.3
//! "Physical Region Page Entry and List").
//!
//! A transfer of any length over a contiguous buffer: PRP Entry 1 points at the first
//! byte (a dword-aligned offset into its page is allowed); if the data ends within the
//! next page, PRP Entry 2 points at that page; otherwise PRP Entry 2 points at a PRP
//! list of page addresses. A list page holds 512 entries; when more are needed, the last
//! entry of a page points to the next list page ("PRP List chaining").
//! No transfer limit is applied here: nvtest sends over-MDTS transfers on purpose.

use crate::device::DeviceError;
use crate::driver::memory::PAGE_SIZE;
use crate::transport::DmaRegion;
use zerocopy::IntoBytes;

/// PRP entries in one list page (8 bytes each).
pub const ENTRIES_PER_LIST_PAGE: usize = PAGE_SIZE / 8;

/// Pages after the first that a transfer of `len` bytes starting at `addr` touches.
fn following_pages(addr: u64, len: usize) -> usize {
    let offset = (addr % PAGE_SIZE as u64) as usize;
    let first = (PAGE_SIZE - offset).min(len);
    (len - first).div_ceil(PAGE_SIZE)
}

/// How many PRP list pages a transfer of `len` bytes at `addr` needs: none when PRP
/// Entry 2 is absent or a data page, else enough pages of 511 entries plus a chain
/// pointer, the last holding up to 512.
pub fn list_pages_needed(addr: u64, len: usize) -> usize {
    let n = following_pages(addr, len);
    if n <= 1 {
        0
    } else {
        (n - 1).div_ceil(ENTRIES_PER_LIST_PAGE - 1)
    }
}

/// Describes the contiguous buffer `addr .. addr + len` with PRP Entry 1 and 2, writing
/// PRP lists into the contiguous, page-aligned `list` area (at least
/// [`list_pages_needed`] pages). Returns `(prp1, prp2)`; `prp2` is 0 when unused.
pub fn build(dma: &DmaRegion, addr: u64, len: usize, list: u64) -> Result<(u64, u64), DeviceError> {
    if !addr.is_multiple_of(4) {
        return Err(DeviceError::Driver(format!("PRP Entry 1 {addr:#x} is not dword aligned (§4.3)")));
    }
    if !list.is_multiple_of(PAGE_SIZE as u64) {
        return Err(DeviceError::Driver(format!("PRP list area {list:#x} is not page aligned")));
    }
    let n = following_pages(addr, len);
    let page_after = (addr / PAGE_SIZE as u64 + 1) * PAGE_SIZE as u64;
    match n {
        0 => return Ok((addr, 0)),
        1 => return Ok((addr, page_after)),
        _ => {}
    }
    let mut entries = [0u64; ENTRIES_PER_LIST_PAGE];
    let mut written = 0;
    let mut list_page = list;
    while written < n {
        let remaining = n - written;
        // The last list page may use all 512 slots; any other ends with a chain pointer.
        let data_slots = if remaining <= ENTRIES_PER_LIST_PAGE { remaining } else { ENTRIES_PER_LIST_PAGE - 1 };
        for (i, entry) in entries.iter_mut().take(data_slots).enumerate() {
            *entry = page_after + ((written + i) * PAGE_SIZE) as u64;
        }
        let mut used = data_slots;
        if data_slots < remaining {
            entries[used] = list_page + PAGE_SIZE as u64;
            used += 1;
        }
        dma.write(list_page, entries[..used].as_bytes()).map_err(crate::transport::TransportError::from)?;
        written += data_slots;
        list_page += PAGE_SIZE as u64;
    }
    Ok((addr, list))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x1_0000_0000;

    fn entry(dma: &DmaRegion, at: u64) -> u64 {
        let mut b = [0u8; 8];
        dma.read(at, &mut b).unwrap();
        u64::from_le_bytes(b)
    }

    #[test]
    fn one_page_uses_prp1_only_and_two_pages_use_prp2_as_data() {
        let dma = DmaRegion::heap(64 * PAGE_SIZE, BASE);
        assert_eq!(build(&dma, BASE, 4096, BASE + 0x8000).unwrap(), (BASE, 0));
        assert_eq!(build(&dma, BASE + 0x200, 512, BASE + 0x8000).unwrap(), (BASE + 0x200, 0));
        assert_eq!(build(&dma, BASE, 8192, BASE + 0x8000).unwrap(), (BASE, BASE + 0x1000));
        // An offset into the first page pushes 4 KiB over two pages.
        assert_eq!(build(&dma, BASE + 0x800, 4096, BASE + 0x8000).unwrap(), (BASE + 0x800, BASE + 0x1000));
        assert_eq!(list_pages_needed(BASE + 0x800, 4096), 0);
    }

    #[test]
    fn three_pages_need_a_list() {
        let dma = DmaRegion::heap(64 * PAGE_SIZE, BASE);
        let list = BASE + 0x20000;
        assert_eq!(list_pages_needed(BASE, 3 * 4096), 1);
        assert_eq!(build(&dma, BASE, 3 * 4096, list).unwrap(), (BASE, list));
        assert_eq!(entry(&dma, list), BASE + 0x1000);
        assert_eq!(entry(&dma, list + 8), BASE + 0x2000);
    }

    #[test]
    fn lists_chain_after_511_entries() {
        // 513 following pages: 511 entries + chain pointer, then 2 entries.
        let len = 514 * PAGE_SIZE;
        assert_eq!(list_pages_needed(BASE, len), 2);
        // 512 following pages fit exactly one list page.
        assert_eq!(list_pages_needed(BASE, 513 * PAGE_SIZE), 1);
        let dma = DmaRegion::heap(600 * PAGE_SIZE, BASE);
        let list = BASE + 520 * PAGE_SIZE as u64;
        build(&dma, BASE, len, list).unwrap();
        assert_eq!(entry(&dma, list + 510 * 8), BASE + 511 * 4096);
        assert_eq!(entry(&dma, list + 511 * 8), list + 4096, "chain pointer");
        assert_eq!(entry(&dma, list + 4096), BASE + 512 * 4096);
        assert_eq!(entry(&dma, list + 4096 + 8), BASE + 513 * 4096);
    }

    #[test]
    fn misaligned_pointers_are_refused() {
        let dma = DmaRegion::heap(4 * PAGE_SIZE, BASE);
        assert!(build(&dma, BASE + 2, 16, BASE + 0x1000).is_err());
        assert!(build(&dma, BASE, 3 * 4096, BASE + 0x1008).is_err());
    }
}
