//! Host memory and data pointers for driving a [`CommandSet`] directly, without the
//! queue engine: for unit tests of the command set and of anything built on it.
//!
//! [`HostBuffer`] is a [`DataPointer`] over a contiguous buffer in a [`DmaRegion`],
//! optionally split at memory page boundaries as PRPs split it (§4.3). [`TestHost`] owns
//! host memory, a data buffer and a metadata buffer, and runs commands.

use crate::exec::{CommandSet, ControllerContext, DataPointer, Done};
use nvme::spec::identify::{
    self, Cns, ControllerList, Dps, Flbas, IdentifyController, IdentifyNamespace, NamespaceList, Nmic,
};
use nvme::spec::{log, namespace, nvm, Command, Status};
use nvme::transport::DmaRegion;
use zerocopy::{FromBytes, IntoBytes};

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

/// Commands with their data, for tests.
impl TestHost {
    /// Identify with `cns` for `nsid` (and CNTID `cntid`): the status and 4096 bytes.
    pub fn identify(&mut self, set: &mut dyn CommandSet, cns: u8, nsid: u32, cntid: u16) -> (Done, Vec<u8>) {
        self.admin_read(set, &identify::identify(cns, nsid, cntid), 4096)
    }

    /// Identify Controller.
    pub fn identify_controller(&mut self, set: &mut dyn CommandSet) -> IdentifyController {
        let (_, bytes) = self.identify(set, Cns::Controller as u8, 0, 0);
        IdentifyController::read_from_bytes(&bytes).unwrap_or_default()
    }

    /// Identify Namespace (CNS 00h) for `nsid`.
    pub fn identify_namespace(&mut self, set: &mut dyn CommandSet, nsid: u32) -> (Done, IdentifyNamespace) {
        let (done, bytes) = self.identify(set, Cns::Namespace as u8, nsid, 0);
        (done, IdentifyNamespace::read_from_bytes(&bytes).unwrap_or_default())
    }

    /// A namespace list (CNS 02h or 10h) after `nsid`.
    pub fn namespace_list(&mut self, set: &mut dyn CommandSet, cns: Cns, nsid: u32) -> (Done, Vec<u32>) {
        let (done, bytes) = self.identify(set, cns as u8, nsid, 0);
        let list = NamespaceList::read_from_bytes(&bytes).unwrap_or_default();
        (done, list.ids().collect())
    }

    /// Namespace Management create of `nsze` blocks (NCAP the same) in LBA format `flbas`.
    pub fn create_namespace(&mut self, set: &mut dyn CommandSet, nsze: u64, flbas: Flbas) -> Done {
        let spec = IdentifyNamespace::for_create(nsze, nsze, flbas, Dps::new(), Nmic::new());
        self.put(spec.as_bytes());
        self.admin(set, &namespace::namespace_create())
    }

    /// Namespace Management delete of `nsid`.
    pub fn delete_namespace(&mut self, set: &mut dyn CommandSet, nsid: u32) -> Done {
        self.admin(set, &namespace::namespace_delete(nsid))
    }

    /// Namespace Attachment of `nsid` to (`attach`) or from the `controllers`.
    pub fn attachment(&mut self, set: &mut dyn CommandSet, attach: bool, nsid: u32, controllers: &[u16]) -> Done {
        let list = ControllerList::from_ids(controllers).unwrap_or_default();
        self.put(list.as_bytes());
        let cmd = if attach { namespace::namespace_attach(nsid) } else { namespace::namespace_detach(nsid) };
        self.admin(set, &cmd)
    }

    /// Write `data` (whole blocks of `nlb + 1`) at `slba` of `nsid`.
    pub fn write(&mut self, set: &mut dyn CommandSet, nsid: u32, slba: u64, nlb: u16, data: &[u8]) -> Done {
        self.put(data);
        self.io(set, &nvm::write(nsid, slba, nlb, false))
    }

    /// Read `nlb + 1` blocks at `slba` of `nsid`: the status and `len` bytes.
    pub fn read(&mut self, set: &mut dyn CommandSet, nsid: u32, slba: u64, nlb: u16, len: usize) -> (Done, Vec<u8>) {
        self.poison(0xA5);
        let done = self.io(set, &nvm::read(nsid, slba, nlb));
        (done, self.get(len))
    }

    /// Get Log Page `lid` for `nsid`, `bytes` long, with RAE as given.
    pub fn log_page(&mut self, set: &mut dyn CommandSet, lid: u8, nsid: u32, bytes: u32, rae: bool) -> (Done, Vec<u8>) {
        match log::get_log_page(lid, nsid, bytes, 0, rae) {
            Ok(cmd) => self.admin_read(set, &cmd, bytes as usize),
            Err(_) => (Done::err(Status::INVALID_FIELD), Vec::new()),
        }
    }
}
