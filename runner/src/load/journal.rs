//! The hook every write and flush of a workload passes: when it was submitted and when
//! (and how) it completed, in the order the engine saw it. The power-fail work
//! ([`crate::power`]) judges from it, after a cut, which generation each block may hold;
//! tests use [`MemoryJournal`].

/// What a journalled command does to the media.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Write,
    /// Dataset Management with the Deallocate attribute.
    Deallocate,
    /// Flush (§6.8): makes every write completed before it durable (`blocks` is 0).
    Flush,
}

/// One data-changing command (or Flush) of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteRecord {
    pub nsid: u32,
    pub first_lba: u64,
    pub blocks: u64,
    /// The write's generation (its blocks' tag); 0 for a deallocate or a flush.
    pub generation: u64,
    pub change: Change,
    /// Sent with FUA.
    pub fua: bool,
    /// The target's clock at submission (ns).
    pub submitted_ns: u64,
}

/// What the engine tells about every write, deallocate and flush, in the order it happens.
pub trait Journal {
    /// Before the command is handed to the controller.
    fn submitted(&mut self, write: &WriteRecord);
    /// When its completion arrived: `success` is the status' verdict.
    fn completed(&mut self, write: &WriteRecord, completed_ns: u64, success: bool);
}

/// No journal.
pub struct NoJournal;

impl Journal for NoJournal {
    fn submitted(&mut self, _: &WriteRecord) {}
    fn completed(&mut self, _: &WriteRecord, _: u64, _: bool) {}
}

/// Every record in memory, in order: `(record, Some((completed_ns, success)))` once it completed.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    pub records: Vec<(WriteRecord, Option<(u64, bool)>)>,
}

impl Journal for MemoryJournal {
    fn submitted(&mut self, write: &WriteRecord) {
        self.records.push((*write, None));
    }

    fn completed(&mut self, write: &WriteRecord, completed_ns: u64, success: bool) {
        if let Some(entry) = self.records.iter_mut().rev().find(|(w, done)| w == write && done.is_none()) {
            entry.1 = Some((completed_ns, success));
        }
    }
}
