//! The campaign journal on the host: every write and flush of a power-fail load as the
//! engine journals it, batched and synced to a file, so that what each block may hold
//! can be worked out after nvtest itself (or the host) died.
//!
//! Layout: the magic `NVTJRNL1`, a little-endian u32 length and a JSON [`Header`]; then
//! fixed 48-byte [`Record`]s, each ending in a CRC-32C of its first 44 bytes. A record
//! cut short or failing its CRC ends the journal (the torn tail of a writer that died
//! mid-record): [`read`] returns what came before and says how many bytes it ignored.
//!
//! Records are buffered and the file is synced (fdatasync) every [`SYNC_EVERY`] records
//! or [`SYNC_AFTER`], whichever comes first, and at every [`FileJournal::sync`] (before a
//! cut), so the journal does not throttle the load; a write submitted after the last synced record is unknown to a reader and is
//! judged as in flight by whoever reads the journal (its generation is newer than any
//! journalled one).

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crc::{Crc, Table, CRC_32_ISCSI};
use serde::{Deserialize, Serialize};

use crate::load::{Change, Journal, WriteRecord};

/// The file's first bytes.
pub const MAGIC: &[u8; 8] = b"NVTJRNL1";
/// Bytes of one record.
pub const RECORD_BYTES: usize = 48;
/// Records between two syncs of the file at most (about 3 MiB)…
pub const SYNC_EVERY: u32 = 65_536;
/// …and the longest a record waits for its sync (checked as records are added).
pub const SYNC_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

static CRC32C: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISCSI);

/// What the journal is of: enough to find the campaign again and judge its last cycle.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// The journal format ([`FORMAT`]).
    pub format: u32,
    /// The target as given on the command line (`nvtest resume` opens it again).
    pub target: String,
    /// `SUITE::CASE`.
    pub case: String,
    /// The run seed (`--seed` replays the campaign).
    pub seed: u64,
    /// The load's ranges, each with the format its namespace had.
    #[serde(default)]
    pub ranges: Vec<JournalRange>,
    /// Why every completed write had to survive a cut (the finding's words); `None`: only
    /// what FUA and Flush made durable.
    #[serde(default)]
    pub every_completed_write: Option<String>,
    /// The cycles end in a normal shutdown before the power goes.
    #[serde(default)]
    pub shutdown: bool,
}

/// The journal format this nvtest writes and reads (2: ranges name their format).
pub const FORMAT: u32 = 2;

/// One range of the load, with the LBA format its namespace had: a namespace formatted
/// otherwise since holds nothing the journal can judge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalRange {
    pub nsid: u32,
    pub first_lba: u64,
    pub blocks: u64,
    /// Data bytes per block (LBA Data Size of the format in use).
    pub block_size: u64,
    /// Metadata bytes per block (MS of the format in use).
    pub metadata_size: u64,
}

/// Where the floor of the cycle in progress is kept beside the journal at `path`.
pub fn floor_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".floor");
    PathBuf::from(name)
}

/// What one block range of the floor holds, as the floor file stores it.
#[derive(Serialize, Deserialize)]
struct FloorRun {
    nsid: u32,
    first: u64,
    count: u64,
    state: crate::data::Expectation,
}

/// Writes `floor` (what every block held when the cycle began) beside the journal:
/// written to a temporary name, synced, then renamed over the previous cycle's, so a
/// reader finds one whole floor or the one before it, never half of one.
pub fn write_floor(journal: &Path, floor: &crate::data::HostMap) -> Result<(), String> {
    let runs: Vec<FloorRun> = floor
        .namespaces()
        .flat_map(|(nsid, map)| {
            map.known().map(move |s| FloorRun { nsid, first: s.first, count: s.count, state: s.state })
        })
        .collect();
    let path = floor_path(journal);
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    let fail = |e: std::io::Error| format!("{}: {e}", tmp.display());
    let json = serde_json::to_vec(&runs).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let mut file = File::create(&tmp).map_err(fail)?;
    file.write_all(&json).and_then(|_| file.sync_data()).map_err(fail)?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The floor [`write_floor`] left beside the journal at `journal`.
pub fn read_floor(journal: &Path) -> Result<crate::data::HostMap, String> {
    let path = floor_path(journal);
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let runs: Vec<FloorRun> = serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut floor = crate::data::HostMap::default();
    for r in runs {
        floor.namespace_mut(r.nsid).set(r.first, r.count, r.state);
    }
    Ok(floor)
}

/// One event of the campaign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// A power cycle begins: its number and seed.
    Cycle {
        cycle: u64,
        seed: u64,
    },
    Submitted(WriteRecord),
    Completed {
        record: WriteRecord,
        completed_ns: u64,
        success: bool,
    },
    /// The power was cut (or switched off after a normal shutdown).
    Cut {
        cycle: u64,
    },
    /// The cycle's verification ended without findings.
    Verified {
        cycle: u64,
    },
}

impl Record {
    /// The record's 48 bytes.
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        let (kind, flags, nsid, lba, blocks, generation, time) = match *self {
            Record::Cycle { cycle, seed } => (1u8, 0u8, 0, cycle, 0, seed, 0),
            Record::Submitted(r) => {
                (2 + change_code(r.change), r.fua as u8, r.nsid, r.first_lba, r.blocks, r.generation, r.submitted_ns)
            }
            Record::Completed { record: r, success, .. } => (
                5 + change_code(r.change),
                r.fua as u8 | (success as u8) << 1,
                r.nsid,
                r.first_lba,
                r.blocks,
                r.generation,
                r.submitted_ns,
            ),
            Record::Cut { cycle } => (8, 0, 0, cycle, 0, 0, 0),
            Record::Verified { cycle } => (9, 0, 0, cycle, 0, 0, 0),
        };
        b[0] = kind;
        b[1] = flags;
        b[4..8].copy_from_slice(&nsid.to_le_bytes());
        b[8..16].copy_from_slice(&lba.to_le_bytes());
        b[16..24].copy_from_slice(&blocks.to_le_bytes());
        b[24..32].copy_from_slice(&generation.to_le_bytes());
        b[32..40].copy_from_slice(&time.to_le_bytes());
        if let Record::Completed { record, completed_ns, .. } = *self {
            // Bytes 40..44 of a completion: its latency in ns (saturated at about 4.3 s).
            let latency = completed_ns.saturating_sub(record.submitted_ns).min(u32::MAX as u64) as u32;
            b[40..44].copy_from_slice(&latency.to_le_bytes());
        }
        let crc = CRC32C.checksum(&b[..44]);
        b[44..48].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// The record in `b`, or `None` when its CRC or kind is wrong.
    pub fn decode(b: &[u8; RECORD_BYTES]) -> Option<Record> {
        let crc = u32::from_le_bytes(b[44..48].try_into().ok()?);
        if CRC32C.checksum(&b[..44]) != crc {
            return None;
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        let nsid = u32::from_le_bytes(b[4..8].try_into().ok()?);
        let (kind, flags) = (b[0], b[1]);
        let write = |change| WriteRecord {
            nsid,
            first_lba: u64_at(8),
            blocks: u64_at(16),
            generation: u64_at(24),
            change,
            fua: flags & 1 != 0,
            submitted_ns: u64_at(32),
        };
        Some(match kind {
            1 => Record::Cycle { cycle: u64_at(8), seed: u64_at(24) },
            2..=4 => Record::Submitted(write(change_of(kind - 2)?)),
            5..=7 => {
                let record = write(change_of(kind - 5)?);
                let delta = u32::from_le_bytes(b[40..44].try_into().ok()?) as u64;
                Record::Completed { record, completed_ns: record.submitted_ns + delta, success: flags & 2 != 0 }
            }
            8 => Record::Cut { cycle: u64_at(8) },
            9 => Record::Verified { cycle: u64_at(8) },
            _ => return None,
        })
    }
}

fn change_code(c: Change) -> u8 {
    match c {
        Change::Write => 0,
        Change::Deallocate => 1,
        Change::Flush => 2,
    }
}

fn change_of(code: u8) -> Option<Change> {
    match code {
        0 => Some(Change::Write),
        1 => Some(Change::Deallocate),
        2 => Some(Change::Flush),
        _ => None,
    }
}

/// The journal being written. An I/O error is kept and reported by [`FileJournal::sync`]
/// (the engine's hook cannot fail).
pub struct FileJournal {
    path: PathBuf,
    out: BufWriter<File>,
    unsynced: u32,
    synced_at: std::time::Instant,
    records: u64,
    error: Option<std::io::Error>,
}

impl FileJournal {
    /// Creates (or replaces) the journal at `path` with `header`, synced.
    pub fn create(path: &Path, header: &Header) -> Result<FileJournal, String> {
        let fail = |e: std::io::Error| format!("{}: {e}", path.display());
        let file = File::create(path).map_err(fail)?;
        let mut out = BufWriter::with_capacity(256 * RECORD_BYTES, file);
        let json = serde_json::to_vec(header).map_err(|e| format!("{}: {e}", path.display()))?;
        out.write_all(MAGIC).map_err(fail)?;
        out.write_all(&(json.len() as u32).to_le_bytes()).map_err(fail)?;
        out.write_all(&json).map_err(fail)?;
        let mut journal = FileJournal {
            path: path.to_path_buf(),
            out,
            unsynced: 0,
            synced_at: std::time::Instant::now(),
            records: 0,
            error: None,
        };
        journal.sync()?;
        Ok(journal)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records written.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Appends one record (synced in batches).
    pub fn push(&mut self, record: &Record) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = self.out.write_all(&record.encode()) {
            self.error = Some(e);
            return;
        }
        self.records += 1;
        self.unsynced += 1;
        // The clock is read once in 256 records: cheap next to the records themselves.
        if self.unsynced >= SYNC_EVERY || (self.unsynced.is_multiple_of(256) && self.synced_at.elapsed() >= SYNC_AFTER)
        {
            let _ = self.sync();
        }
    }

    /// Writes out what is buffered and syncs the file's data; the first I/O error so far.
    pub fn sync(&mut self) -> Result<(), String> {
        if self.error.is_none() {
            let synced = self.out.flush().and_then(|_| self.out.get_ref().sync_data());
            if let Err(e) = synced {
                self.error = Some(e);
            }
        }
        self.unsynced = 0;
        self.synced_at = std::time::Instant::now();
        match &self.error {
            Some(e) => Err(format!("journal {}: {e}", self.path.display())),
            None => Ok(()),
        }
    }
}

impl Journal for FileJournal {
    fn submitted(&mut self, write: &WriteRecord) {
        self.push(&Record::Submitted(*write));
    }

    fn completed(&mut self, write: &WriteRecord, completed_ns: u64, success: bool) {
        self.push(&Record::Completed { record: *write, completed_ns, success });
    }
}

/// Both journals, in order: the ledger a cycle is judged by, and the file.
pub struct Both<'a>(pub &'a mut dyn Journal, pub &'a mut dyn Journal);

impl Journal for Both<'_> {
    fn submitted(&mut self, write: &WriteRecord) {
        self.0.submitted(write);
        self.1.submitted(write);
    }

    fn completed(&mut self, write: &WriteRecord, completed_ns: u64, success: bool) {
        self.0.completed(write, completed_ns, success);
        self.1.completed(write, completed_ns, success);
    }
}

/// The last cycle a journal began, as [`Replay::last_cycle`] finds it.
#[derive(Debug)]
pub struct LastCycle {
    pub cycle: u64,
    /// The cycle's seed: its writes' data carry it.
    pub seed: u64,
    /// Its writes and flushes. Without a `Cut` record the journal may lack the last
    /// writes submitted ([`Ledger::journal_ends_after`] is set).
    pub ledger: crate::power::Ledger,
    /// The power was cut (or switched off) with every record of the cycle in the file.
    pub cut: bool,
    /// Its verification ended without findings.
    pub verified: bool,
}

/// A journal read back.
#[derive(Debug)]
pub struct Replay {
    pub header: Header,
    pub records: Vec<Record>,
    /// Bytes after the last whole, valid record (a torn tail), ignored.
    pub torn_bytes: usize,
}

impl Replay {
    /// The last cycle the journal began, with its ledger; `None` before the first.
    pub fn last_cycle(&self) -> Option<LastCycle> {
        let start = self.records.iter().rposition(|r| matches!(r, Record::Cycle { .. }))?;
        let Record::Cycle { cycle, seed } = self.records[start] else { return None };
        let mut last = LastCycle { cycle, seed, ledger: crate::power::Ledger::default(), cut: false, verified: false };
        let mut newest = 0;
        for r in &self.records[start + 1..] {
            match *r {
                Record::Submitted(w) => {
                    newest = newest.max(w.generation);
                    last.ledger.submitted(&w);
                }
                Record::Completed { record, completed_ns, success } => {
                    last.ledger.completed(&record, completed_ns, success)
                }
                Record::Cut { cycle: c } => last.cut |= c == cycle,
                Record::Verified { cycle: c } => last.verified |= c == cycle,
                Record::Cycle { .. } => {}
            }
        }
        if !last.cut {
            last.ledger.journal_ends_after = Some(newest);
        }
        Some(last)
    }
}

/// Reads the journal at `path`; a torn tail is not an error.
pub fn read(path: &Path) -> Result<Replay, String> {
    let fail = |what: &str| format!("{}: {what}", path.display());
    let mut bytes = Vec::new();
    File::open(path).and_then(|mut f| f.read_to_end(&mut bytes)).map_err(|e| fail(&e.to_string()))?;
    if bytes.len() < 12 || &bytes[..8] != MAGIC {
        return Err(fail("not an nvtest power-fail journal (no NVTJRNL1 magic)"));
    }
    let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
    let json = bytes.get(12..12 + len).ok_or_else(|| fail("the journal's header is cut short"))?;
    let header: Header = serde_json::from_slice(json).map_err(|e| fail(&format!("the journal's header: {e}")))?;
    if header.format != FORMAT {
        return Err(fail(&format!("journal format {} (this nvtest reads format {FORMAT})", header.format)));
    }
    let body = &bytes[12 + len..];
    let mut records = Vec::with_capacity(body.len() / RECORD_BYTES);
    let mut at = 0;
    while let Some(chunk) = body.get(at..at + RECORD_BYTES) {
        let Some(record) = chunk.try_into().ok().and_then(Record::decode) else { break };
        records.push(record);
        at += RECORD_BYTES;
    }
    Ok(Replay { header, records, torn_bytes: body.len() - at })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::power::ledger::record;
    use crate::power::Ledger;

    fn write(lba: u64, generation: u64, fua: bool) -> WriteRecord {
        record(Change::Write, lba, 8, generation, fua, lba * 10)
    }

    fn flush(at: u64) -> WriteRecord {
        record(Change::Flush, 0, 0, 0, false, at)
    }

    /// A short campaign's events, fed to both journals.
    fn campaign(journal: &mut dyn Journal) {
        for g in 1..=50u64 {
            let w = write(g * 8, g, g % 5 == 0);
            journal.submitted(&w);
            if g % 7 != 0 {
                journal.completed(&w, g * 10 + 3, true);
            }
            if g % 10 == 0 {
                let f = flush(g * 10 + 5);
                journal.submitted(&f);
                journal.completed(&f, g * 10 + 6, true);
            }
        }
    }

    fn ledger_of(records: &[Record]) -> Ledger {
        let mut l = Ledger::default();
        for r in records {
            match *r {
                Record::Submitted(w) => l.submitted(&w),
                Record::Completed { record, completed_ns, success } => l.completed(&record, completed_ns, success),
                _ => {}
            }
        }
        l
    }

    fn header() -> Header {
        Header {
            format: FORMAT,
            target: "sim:enterprise-1.4".into(),
            case: "power-fail::cut-under-load".into(),
            seed: 7,
            ..Header::default()
        }
    }

    #[test]
    fn every_record_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let mut file = FileJournal::create(&path, &header()).unwrap();
        file.push(&Record::Cycle { cycle: 1, seed: 99 });
        campaign(&mut file);
        file.push(&Record::Cut { cycle: 1 });
        file.sync().unwrap();
        let read = read(&path).unwrap();
        assert_eq!(read.header, header());
        assert_eq!(read.torn_bytes, 0);
        assert_eq!(read.records.len() as u64, file.records());
        assert_eq!(read.records.first(), Some(&Record::Cycle { cycle: 1, seed: 99 }));
        let mut memory = Ledger::default();
        campaign(&mut memory);
        let replayed = ledger_of(&read.records);
        let (a, b) = (memory.last_flushes(), replayed.last_flushes());
        for i in 0..memory.writes.len() {
            let s = crate::power::Survival::Flushed;
            assert_eq!(memory.durable(i, &s, &a), replayed.durable(i, &s, &b), "write {i}");
        }
        assert_eq!(memory.in_flight(), replayed.in_flight());
    }

    #[test]
    fn a_journal_cut_short_mid_record_reads_up_to_its_last_whole_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let mut file = FileJournal::create(&path, &header()).unwrap();
        campaign(&mut file);
        file.sync().unwrap();
        let whole = read(&path).unwrap().records;
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len - 20).unwrap();
        let torn = read(&path).unwrap();
        assert_eq!(torn.torn_bytes, RECORD_BYTES - 20);
        assert_eq!(torn.records, whole[..whole.len() - 1]);
        // A flipped bit ends the journal there, too.
        let mut bytes = std::fs::read(&path).unwrap();
        let header_len = 12 + u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
        bytes[header_len + 3 * RECORD_BYTES + 9] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read(&path).unwrap().records.len(), 3);
    }

    #[test]
    fn a_file_that_is_no_journal_is_a_one_line_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        std::fs::write(&path, b"hello").unwrap();
        let e = read(&path).unwrap_err();
        assert!(e.contains("not an nvtest power-fail journal") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn the_last_cycle_comes_with_its_ledger_and_whether_the_journal_reached_its_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.nvtj");
        let mut file = FileJournal::create(&path, &header()).unwrap();
        file.push(&Record::Cycle { cycle: 1, seed: 11 });
        campaign(&mut file);
        file.push(&Record::Cut { cycle: 1 });
        file.push(&Record::Verified { cycle: 1 });
        file.push(&Record::Cycle { cycle: 2, seed: 22 });
        campaign(&mut file);
        file.sync().unwrap();
        // nvtest died in cycle 2 before its cut: writes after the last record are unknown.
        let last = read(&path).unwrap().last_cycle().unwrap();
        assert_eq!((last.cycle, last.seed, last.cut, last.verified), (2, 22, false, false));
        assert_eq!(last.ledger.writes.len(), 50);
        assert_eq!(last.ledger.journal_ends_after, Some(50));
        assert!(last.ledger.unjournalled(51) && !last.ledger.unjournalled(50));
        // With its cut journalled the cycle's journal is whole: nothing is unjournalled.
        file.push(&Record::Cut { cycle: 2 });
        file.sync().unwrap();
        let last = read(&path).unwrap().last_cycle().unwrap();
        assert!(last.cut && !last.verified && last.ledger.journal_ends_after.is_none());
        assert!(!last.ledger.unjournalled(u64::MAX));
    }

    #[test]
    fn the_floor_beside_the_journal_reads_back_as_written() {
        use crate::data::{Expectation, HostMap};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.nvtj");
        let mut floor = HostMap::default();
        floor.namespace_mut(1).set(0, 100, Expectation::Written { generation: 3, seed: 9 });
        floor.namespace_mut(1).set(200, 8, Expectation::Zeroes);
        floor.namespace_mut(2).set(5, 1, Expectation::Erased { dlfeat: true });
        write_floor(&path, &floor).unwrap();
        let back = read_floor(&path).unwrap();
        for nsid in [1, 2, 3] {
            for lba in [0, 99, 100, 200, 207, 208, 5] {
                assert_eq!(back.state_at(nsid, lba), floor.state_at(nsid, lba), "NSID {nsid} LBA {lba}");
            }
        }
        assert!(read_floor(&dir.path().join("other.nvtj")).unwrap_err().contains("other.nvtj.floor"));
    }
}
