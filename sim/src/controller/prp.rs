//! The controller's reading of PRP entries and lists (NVMe 1.4 §4.3 "Physical Region Page
//! Entry and List"): a [`DataPointer`] over a command's PRP Entry 1 and 2.
//!
//! Rules enforced, each with the status the spec assigns:
//! - PRP Entry 1 may carry an offset into its page, which must be dword aligned (bits
//!   1:0 cleared), else PRP Offset Invalid.
//! - When the data ends within the page after PRP Entry 1's, PRP Entry 2 is that page
//!   and must have offset 0; otherwise PRP Entry 2 is a PRP List pointer (qword
//!   aligned, an offset into its page allowed). Every data entry of a list has offset 0.
//! - The last entry of a list page, when more entries are needed, points to the next
//!   list page; as an entry of a list it has offset 0 too.
//! - Any address outside host memory is a Data Transfer Error.
//!
//! The whole transfer is validated before any segment is visited, and nothing here
//! allocates: list entries are read one at a time from host memory.

use nvme::spec::Status;
use nvme::transport::DmaRegion;

use crate::exec::DataPointer;

/// PRP Entry 1 and 2 of one command, with the memory page size the host selected.
pub struct PrpPointer<'a> {
    dma: &'a DmaRegion,
    prp1: u64,
    prp2: u64,
    page_size: u64,
}

impl<'a> PrpPointer<'a> {
    pub fn new(dma: &'a DmaRegion, prp1: u64, prp2: u64, page_size: usize) -> Self {
        PrpPointer { dma, prp1, prp2, page_size: page_size as u64 }
    }

    fn in_memory(&self, addr: u64, len: u64) -> Result<(), Status> {
        let base = self.dma.base();
        let end = base + self.dma.len() as u64;
        match addr.checked_add(len) {
            Some(stop) if addr >= base && stop <= end => Ok(()),
            _ => Err(Status::DATA_TRANSFER_ERROR),
        }
    }

    fn read_entry(&self, at: u64) -> Result<u64, Status> {
        let mut b = [0u8; 8];
        self.dma.read(at, &mut b).map_err(|_| Status::DATA_TRANSFER_ERROR)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Walks the PRPs for `len` bytes, handing contiguous runs to `visit`.
    fn walk(&self, len: usize, visit: &mut dyn FnMut(u64, usize)) -> Result<(), Status> {
        if len == 0 {
            return Ok(());
        }
        let page = self.page_size;
        let mut run = Run::default();
        if self.prp1 & 3 != 0 {
            return Err(Status::PRP_OFFSET_INVALID);
        }
        let first = (page - (self.prp1 & (page - 1))).min(len as u64);
        self.in_memory(self.prp1, first)?;
        run.add(self.prp1, first, visit);
        let mut remaining = len as u64 - first;
        if remaining == 0 {
        } else if remaining <= page {
            if self.prp2 & (page - 1) != 0 {
                return Err(Status::PRP_OFFSET_INVALID);
            }
            self.in_memory(self.prp2, remaining)?;
            run.add(self.prp2, remaining, visit);
        } else {
            if self.prp2 & 7 != 0 {
                return Err(Status::PRP_OFFSET_INVALID);
            }
            let mut at = self.prp2;
            while remaining > 0 {
                let last_in_page = (at & (page - 1)) == page - 8;
                let entry = self.read_entry(at)?;
                if last_in_page && remaining > page {
                    // More than one entry still needed: this one chains to the next list
                    // page. Like every entry of a list it has offset 0, so each list page
                    // holds entries before its own last one and the walk always advances.
                    if entry & (page - 1) != 0 {
                        return Err(Status::PRP_OFFSET_INVALID);
                    }
                    at = entry;
                    continue;
                }
                if entry & (page - 1) != 0 {
                    return Err(Status::PRP_OFFSET_INVALID);
                }
                let seg = remaining.min(page);
                self.in_memory(entry, seg)?;
                run.add(entry, seg, visit);
                remaining -= seg;
                at += 8;
            }
        }
        run.flush(visit);
        Ok(())
    }
}

/// Merges adjacent segments so a contiguous buffer is visited as one.
#[derive(Default)]
struct Run {
    addr: u64,
    len: u64,
}

impl Run {
    fn add(&mut self, addr: u64, len: u64, visit: &mut dyn FnMut(u64, usize)) {
        if self.len > 0 && self.addr + self.len == addr {
            self.len += len;
            return;
        }
        self.flush(visit);
        self.addr = addr;
        self.len = len;
    }

    fn flush(&mut self, visit: &mut dyn FnMut(u64, usize)) {
        if self.len > 0 {
            visit(self.addr, self.len as usize);
            self.len = 0;
        }
    }
}

impl DataPointer for PrpPointer<'_> {
    fn dma(&self) -> &DmaRegion {
        self.dma
    }

    fn segments(&self, len: usize, visit: &mut dyn FnMut(u64, usize)) -> Result<(), Status> {
        self.walk(len, &mut |_, _| {})?;
        self.walk(len, visit)
    }

    fn copy_to_host(&self, data: &[u8]) -> Result<(), Status> {
        let mut at = 0;
        let mut failed = false;
        self.segments(data.len(), &mut |addr, len| {
            failed |= self.dma.write(addr, &data[at..at + len]).is_err();
            at += len;
        })?;
        if failed {
            return Err(Status::DATA_TRANSFER_ERROR);
        }
        Ok(())
    }

    fn copy_from_host(&self, len: usize) -> Result<Vec<u8>, Status> {
        self.walk(len, &mut |_, _| {})?;
        let mut out = vec![0u8; len];
        let mut at = 0;
        let mut failed = false;
        self.walk(len, &mut |addr, seg| {
            failed |= self.dma.read(addr, &mut out[at..at + seg]).is_err();
            at += seg;
        })?;
        if failed {
            return Err(Status::DATA_TRANSFER_ERROR);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x1_0000_0000;
    const PAGE: usize = 4096;

    fn segments(p: &PrpPointer<'_>, len: usize) -> Result<Vec<(u64, usize)>, Status> {
        let mut v = Vec::new();
        p.segments(len, &mut |a, l| v.push((a, l)))?;
        Ok(v)
    }

    fn put(dma: &DmaRegion, at: u64, entries: &[u64]) {
        for (i, e) in entries.iter().enumerate() {
            dma.write(at + 8 * i as u64, &e.to_le_bytes()).unwrap();
        }
    }

    #[test]
    fn prp1_alone_with_a_dword_offset() {
        let dma = DmaRegion::heap(16 * PAGE, BASE);
        let p = PrpPointer::new(&dma, BASE + 0x204, 0, PAGE);
        assert_eq!(segments(&p, 512).unwrap(), vec![(BASE + 0x204, 512)]);
        let p = PrpPointer::new(&dma, BASE + 0x202, 0, PAGE);
        assert_eq!(segments(&p, 512), Err(Status::PRP_OFFSET_INVALID));
    }

    #[test]
    fn prp2_is_a_page_when_data_ends_in_the_next_page() {
        let dma = DmaRegion::heap(16 * PAGE, BASE);
        let p = PrpPointer::new(&dma, BASE + 0x800, BASE + 0x5000, PAGE);
        assert_eq!(segments(&p, 4096).unwrap(), vec![(BASE + 0x800, 0x800), (BASE + 0x5000, 0x800)]);
        let p = PrpPointer::new(&dma, BASE, BASE + 0x5010, PAGE);
        assert_eq!(segments(&p, 8192), Err(Status::PRP_OFFSET_INVALID));
    }

    #[test]
    fn lists_with_an_offset_and_adjacent_pages_merged() {
        let dma = DmaRegion::heap(32 * PAGE, BASE);
        let list = BASE + 0x10_010; // a list may start at a qword offset in its page
        put(&dma, list, &[BASE + 0x1000, BASE + 0x2000, BASE + 0x8000]);
        let p = PrpPointer::new(&dma, BASE, list, PAGE);
        assert_eq!(segments(&p, 4 * PAGE - 100).unwrap(), vec![(BASE, 3 * PAGE), (BASE + 0x8000, PAGE - 100)]);
    }

    #[test]
    fn list_entries_must_be_page_aligned() {
        let dma = DmaRegion::heap(32 * PAGE, BASE);
        put(&dma, BASE + 0x10_000, &[BASE + 0x1000, BASE + 0x2200]);
        let p = PrpPointer::new(&dma, BASE, BASE + 0x10_000, PAGE);
        let mut visited = 0;
        assert_eq!(p.segments(3 * PAGE, &mut |_, _| visited += 1), Err(Status::PRP_OFFSET_INVALID));
        assert_eq!(visited, 0, "nothing is visited when the PRPs are invalid");
    }

    #[test]
    fn list_pages_chain_through_their_last_entry() {
        let dma = DmaRegion::heap(1100 * PAGE, BASE);
        let data = BASE;
        let list1 = BASE + 1024 * PAGE as u64;
        let list2 = list1 + 8 * PAGE as u64;
        // 600 pages: PRP1 covers one, 599 follow: 511 in list 1 + chain, 88 in list 2.
        let mut first: Vec<u64> = (1..512).map(|i| data + (i * PAGE) as u64).collect();
        first.push(list2);
        put(&dma, list1, &first);
        let second: Vec<u64> = (512..600).map(|i| data + (i * PAGE) as u64).collect();
        put(&dma, list2, &second);
        let p = PrpPointer::new(&dma, data, list1, PAGE);
        assert_eq!(segments(&p, 600 * PAGE).unwrap(), vec![(data, 600 * PAGE)]);
    }

    #[test]
    fn addresses_outside_host_memory_are_data_transfer_errors() {
        let dma = DmaRegion::heap(4 * PAGE, BASE);
        let p = PrpPointer::new(&dma, 0, 0, PAGE);
        assert_eq!(segments(&p, 512), Err(Status::DATA_TRANSFER_ERROR));
        let p = PrpPointer::new(&dma, BASE + 3 * PAGE as u64, 0x2000, PAGE);
        assert_eq!(segments(&p, 2 * PAGE), Err(Status::DATA_TRANSFER_ERROR));
        // A list pointer outside memory.
        let p = PrpPointer::new(&dma, BASE, 0x8000, PAGE);
        assert_eq!(segments(&p, 3 * PAGE), Err(Status::DATA_TRANSFER_ERROR));
        assert_eq!(segments(&PrpPointer::new(&dma, 0, 0, PAGE), 0).unwrap(), vec![]);
    }

    #[test]
    fn copies_follow_the_segments() {
        let dma = DmaRegion::heap(16 * PAGE, BASE);
        let p = PrpPointer::new(&dma, BASE + 0xffc, BASE + 0x3000, PAGE);
        p.copy_to_host(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let mut b = [0u8; 4];
        dma.read(BASE + 0x3000, &mut b).unwrap();
        assert_eq!(b, [5, 6, 7, 8]);
        assert_eq!(p.copy_from_host(8).unwrap(), vec![1, 2, 3, 4, 5, 6, 7, 8]);
    }
}
