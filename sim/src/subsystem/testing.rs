//! Host memory and data pointers for driving a [`CommandSet`] directly, without the
//! queue engine: for unit tests of the command set and of anything built on it.
//!
//! [`HostBuffer`] is a [`DataPointer`] over a contiguous buffer in a [`DmaRegion`],
//! optionally split at memory page boundaries as PRPs split it (§4.3). [`TestHost`] owns
//! host memory, a data buffer and a metadata buffer, and runs commands.

use crate::exec::{CommandSet, ControllerContext, DataPointer, Done};
use nvme::spec::{Command, Status};
use nvme::transport::DmaRegion;

/// A data buffer at `addr` in host memory.
pub struct HostBuffer<'a> {
    pub dma: &'a DmaRegion,
    pub addr: u64,
    /// Split the buffer into segments at multiples of this page size, as a PRP list
    /// would; `None` hands the buffer over as one segment.
    pub page_size: Option<u64>,
}

impl DataPointer for HostBuffer<'_> {
    fn dma(&self) -> &DmaRegion {
        self.dma
    }

    fn segments(&self, len: usize, visit: &mut dyn FnMut(u64, usize)) -> Result<(), Status> {
        let end = self.addr.checked_add(len as u64).ok_or(Status::DATA_TRANSFER_ERROR)?;
        if self.addr < self.dma.base() || end > self.dma.base() + self.dma.len() as u64 {
            return Err(Status::DATA_TRANSFER_ERROR);
        }
        let mut at = self.addr;
        while at < end {
            let n = match self.page_size {
                Some(page) => (page - at % page).min(end - at),
                None => end - at,
            };
            visit(at, n as usize);
            at += n;
        }
        Ok(())
    }
}

/// Host memory with a data buffer and a metadata buffer, and a controller context.
pub struct TestHost {
    pub dma: DmaRegion,
    pub ctx: ControllerContext,
    /// Bus address of the data buffer.
    pub data_addr: u64,
    /// Bus address of the metadata buffer (put in MPTR by [`TestHost::io`]).
    pub metadata_addr: u64,
    /// Page size the data buffer is split at (`None`: one segment).
    pub page_size: Option<u64>,
}

/// Bytes of the data buffer.
pub const DATA_BUFFER: usize = 4 << 20;
/// Bytes of the metadata buffer.
pub const METADATA_BUFFER: usize = 1 << 20;
const BASE: u64 = 0x1000_0000;

impl TestHost {
    /// Host memory for the controller `cntlid`; the data buffer is split at 4 KiB pages.
    pub fn new(cntlid: u16) -> TestHost {
        TestHost {
            dma: DmaRegion::heap(DATA_BUFFER + METADATA_BUFFER, BASE),
            ctx: ControllerContext { cntlid, ..ControllerContext::default() },
            data_addr: BASE,
            metadata_addr: BASE + DATA_BUFFER as u64,
            page_size: Some(4096),
        }
    }

    fn buffer(&self) -> HostBuffer<'_> {
        HostBuffer { dma: &self.dma, addr: self.data_addr, page_size: self.page_size }
    }

    /// Writes `bytes` at the start of the data buffer.
    pub fn put(&self, bytes: &[u8]) {
        self.dma.write(self.data_addr, &bytes[..bytes.len().min(DATA_BUFFER)]).unwrap_or(());
    }

    /// The first `len` bytes of the data buffer.
    pub fn get(&self, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len.min(DATA_BUFFER)];
        self.dma.read(self.data_addr, &mut out).unwrap_or(());
        out
    }

    /// Writes `bytes` at the start of the metadata buffer.
    pub fn put_metadata(&self, bytes: &[u8]) {
        self.dma.write(self.metadata_addr, &bytes[..bytes.len().min(METADATA_BUFFER)]).unwrap_or(());
    }

    /// The first `len` bytes of the metadata buffer.
    pub fn get_metadata(&self, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len.min(METADATA_BUFFER)];
        self.dma.read(self.metadata_addr, &mut out).unwrap_or(());
        out
    }

    /// Fills the data buffer with `byte` (to see what a command leaves untouched).
    pub fn poison(&self, byte: u8) {
        self.dma.fill(self.data_addr, DATA_BUFFER, byte).unwrap_or(());
    }

    /// Runs an admin command with the data buffer.
    pub fn admin(&mut self, set: &mut dyn CommandSet, cmd: &Command) -> Done {
        let buffer = HostBuffer { dma: &self.dma, addr: self.data_addr, page_size: self.page_size };
        set.admin(&mut self.ctx, cmd, &buffer)
    }

    /// Runs an NVM command with the data buffer, MPTR pointing at the metadata buffer.
    pub fn io(&mut self, set: &mut dyn CommandSet, cmd: &Command) -> Done {
        let mut cmd = *cmd;
        cmd.mptr = self.metadata_addr;
        let buffer = HostBuffer { dma: &self.dma, addr: self.data_addr, page_size: self.page_size };
        set.io(&mut self.ctx, &cmd, &buffer)
    }

    /// Runs an admin command and returns its status and the first `len` bytes of data.
    pub fn admin_read(&mut self, set: &mut dyn CommandSet, cmd: &Command, len: usize) -> (Done, Vec<u8>) {
        self.poison(0xA5);
        let done = self.admin(set, cmd);
        (done, self.get(len))
    }

    /// The data pointer of the data buffer (for calling a command set by hand).
    pub fn data_pointer(&self) -> HostBuffer<'_> {
        self.buffer()
    }
}
