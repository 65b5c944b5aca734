//! The kernel's log (`/dev/kmsg`) as seen by a run on a controller of the Linux NVMe
//! driver: markers written into it, and the kernel's lines about that controller since
//! a cursor, each flagged when it tells of a timeout, a reset or a removal (as
//! blktests keeps the kernel log of a test).
//!
//! ```no_run
//! use nvtest::targets::kmsg::KernelLog;
//! # fn main() -> Result<(), String> {
//! let mut log = KernelLog::open("/dev/kmsg".as_ref(), "nvme0")?; // Err: one line, a note
//! log.mark("run started")?;           // "nvtest: run started" in the kernel log
//! let cursor = log.cursor();          // before a case
//! // ... the case runs ...
//! for line in log.since(cursor) {     // after it failed
//!     println!("{line}");             // "[  12.345678] nvme nvme0: … (timeout)"
//! }
//! # Ok(()) }
//! ```
//!
//! What this module owns: reading the record format of
//! Documentation/ABI/testing/dev-kmsg (`PRIO,SEQ,USEC,FLAGS[,…];TEXT\n`, then
//! dictionary lines that start with a space), non-blocking (EAGAIN: nothing more;
//! EPIPE: records were overwritten before they were read, counted in
//! [`KernelLog::missed`]); deciding which records concern the controller; flagging.
//!
//! - A record's TEXT is kept as the kernel escapes it (`\xNN` for bytes outside
//!   printable ASCII).
//! - The log is read from the oldest record still in the buffer (`SEEK_SET`, not
//!   `SEEK_DATA`, which would skip what `dmesg -c` cleared), once at open, so the
//!   newest sequence number is always known; only the controller's lines are kept
//!   (the newest [`KEPT_LINES`]).
//! - The same API works on a regular file holding records (tests): [`KernelLog::mark`]
//!   then appends a whole record, as the kernel would have made of the write.

use std::collections::VecDeque;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How many of the controller's lines are kept; older ones are dropped first.
pub const KEPT_LINES: usize = 10_000;
/// What every marker starts with; such records are never the controller's lines.
pub const MARKER_PREFIX: &str = "nvtest: ";
/// How long [`KernelLog::mark`] looks for its marker in the log.
const MARK_BOUND: Duration = Duration::from_secs(1);
/// Larger than any record the kernel hands out in one read.
const READ_SIZE: usize = 16 * 1024;

/// What a kernel line tells of the controller, when it is one of the driver's
/// messages about trouble.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flag {
    /// A command timed out ("… QID 3 timeout, aborting", "… timed out").
    Timeout,
    /// The driver reset or will reset the controller ("resetting controller",
    /// "controller is down; will reset").
    Reset,
    /// The driver gave the controller up ("Removing after probe failure",
    /// "Disabling device after reset failure").
    Removed,
    /// Another error the driver reported (a failed command's "I/O Cmd(…)" or
    /// "Admin Cmd(…)" line, an I/O error, an error-level message).
    Other,
}

impl fmt::Display for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Flag::Timeout => "timeout",
            Flag::Reset => "reset",
            Flag::Removed => "removed",
            Flag::Other => "error",
        })
    }
}

/// One kernel record about the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelLine {
    /// The record's sequence number (64-bit, never reused).
    pub seq: u64,
    /// Microseconds since boot when it was logged.
    pub usec: u64,
    /// Its log level, 0 (emergency) ..= 7 (debug); 3 is an error, 4 a warning.
    pub priority: u8,
    /// The message, as the kernel escapes it.
    pub text: String,
    pub flag: Option<Flag>,
}

impl fmt::Display for KernelLine {
    /// `[    12.345678] nvme nvme0: I/O 5 QID 1 timeout, aborting (timeout)`, as dmesg
    /// shows the time, with the flag in brackets at the end.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:5}.{:06}] {}", self.usec / 1_000_000, self.usec % 1_000_000, self.text)?;
        match self.flag {
            Some(flag) => write!(f, " ({flag})"),
            None => Ok(()),
        }
    }
}

/// The kernel log, read for one controller. See the module documentation.
pub struct KernelLog {
    path: PathBuf,
    reader: File,
    /// A regular file (tests), not the kernel's character device.
    fake: bool,
    controller: String,
    pci: Option<String>,
    /// Bytes read and not yet parsed into records.
    pending: Vec<u8>,
    kept: VecDeque<KernelLine>,
    newest: Option<u64>,
    /// The newest record's time, for a fake's marker.
    newest_usec: u64,
    missed: u64,
    /// A marker being looked for, and its sequence number once seen.
    marker: Option<(String, Option<u64>)>,
}

impl KernelLog {
    /// Opens the kernel log at `path` (normally /dev/kmsg) for the controller
    /// `controller` ("nvme0"), whose PCI address (for the PCI core's lines about it) is
    /// read from /sys/class/nvme/<controller>/address where that exists. Reads what the
    /// log holds already. The error is one line (not root, no /dev/kmsg in a
    /// container, …), meant for a note: a run goes on without the kernel's log.
    pub fn open(path: &Path, controller: &str) -> Result<KernelLog, String> {
        let pci = std::fs::read_to_string(format!("/sys/class/nvme/{controller}/address"))
            .ok()
            .map(|a| a.trim().to_owned())
            .filter(|a| !a.is_empty());
        KernelLog::with_pci_address(path, controller, pci.as_deref())
    }

    /// [`Self::open`] with the controller's PCI address given ("0000:01:00.0"), or none.
    pub fn with_pci_address(path: &Path, controller: &str, pci: Option<&str>) -> Result<KernelLog, String> {
        if !is_controller_name(controller) {
            return Err(format!("{controller:?} is not an NVMe controller's name (nvme0, nvme1, …)"));
        }
        let reader = OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| format!("cannot read the kernel log {}: {e}", path.display()))?;
        let meta = reader.metadata().map_err(|e| format!("cannot read the kernel log {}: {e}", path.display()))?;
        let mut log = KernelLog {
            path: path.to_owned(),
            reader,
            fake: !meta.file_type().is_char_device(),
            controller: controller.to_owned(),
            pci: pci.map(str::to_owned),
            pending: Vec::new(),
            kept: VecDeque::new(),
            newest: None,
            newest_usec: 0,
            missed: 0,
            marker: None,
        };
        log.reader
            .seek(SeekFrom::Start(0))
            .map_err(|e| format!("cannot seek in the kernel log {}: {e}", path.display()))?;
        log.pump().map_err(|e| format!("cannot read the kernel log {}: {e}", path.display()))?;
        Ok(log)
    }

    /// The controller this log is read for.
    pub fn controller(&self) -> &str {
        &self.controller
    }

    /// Writes `nvtest: TEXT` into the kernel log and returns its sequence number once it
    /// is read back (a cursor: [`Self::since`] of it gives what the kernel logged after
    /// the marker). Characters the kernel would escape (outside printable ASCII, and
    /// `\`) become `?`; line breaks become spaces. Writing needs root; the log is opened
    /// anew for each marker, so the kernel's per-opener rate limit of /dev/kmsg writes
    /// never drops one. An error (not writable, or the marker never showed:
    /// `kernel.printk_devkmsg` is `off`) is one line.
    pub fn mark(&mut self, text: &str) -> Result<u64, String> {
        let text = format!("{MARKER_PREFIX}{}", sanitize(text));
        let before = self.cursor();
        self.marker = Some((text.clone(), None));
        let written = self.write_marker(&text, before);
        let found = written.and_then(|()| {
            let deadline = Instant::now() + MARK_BOUND;
            loop {
                let _ = self.pump();
                if let Some((_, Some(seq))) = &self.marker {
                    return Ok(*seq);
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "the marker written to {} did not show in the kernel log within {} ms \
                         (is kernel.printk_devkmsg off?)",
                        self.path.display(),
                        MARK_BOUND.as_millis()
                    ));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        self.marker = None;
        found
    }

    fn write_marker(&mut self, text: &str, before: u64) -> Result<(), String> {
        let fail = |e: io::Error| format!("cannot write to the kernel log {}: {e}", self.path.display());
        let mut writer = OpenOptions::new().write(true).append(self.fake).open(&self.path).map_err(fail)?;
        let record = if self.fake {
            // What the kernel would make of the write: facility user (1), level 4.
            let seq = if self.newest.is_some() { before + 1 } else { 0 };
            format!("12,{seq},{},-;{text}\n", self.newest_usec)
        } else {
            // One write is one record; the newline ends it (without one the kernel
            // keeps the record open for a continuation, and readers see it late).
            format!("{text}\n")
        };
        writer.write_all(record.as_bytes()).map_err(fail)
    }

    /// The sequence number of the newest record in the log now (0 while it is empty).
    pub fn cursor(&mut self) -> u64 {
        let _ = self.pump();
        self.newest.unwrap_or(0)
    }

    /// The controller's lines logged after `cursor` (sequence numbers above it), oldest
    /// first: its `nvme nvmeN:` lines, its namespaces' (`nvmeNnM`, `nvmeNcXnM`, their
    /// partitions), and the PCI core's lines about its PCI address when that is known.
    /// Markers are never among them. A read error ends the reading, not the lines.
    pub fn since(&mut self, cursor: u64) -> Vec<KernelLine> {
        let _ = self.pump();
        self.kept.iter().filter(|l| l.seq > cursor).cloned().collect()
    }

    /// How many times records were overwritten in the kernel's buffer before they could
    /// be read (EPIPE): lines of the controller may be missing then.
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// Reads every record available now.
    fn pump(&mut self) -> io::Result<()> {
        let mut buf = vec![0u8; READ_SIZE];
        loop {
            match self.reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    self.pending.extend_from_slice(&buf[..n]);
                    self.take_records(false);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => self.missed += 1,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.take_records(true);
                    return Err(e);
                }
            }
        }
        self.take_records(true);
        Ok(())
    }

    /// Parses the complete records in `pending`; with `all`, also the last one (nothing
    /// more to read now: its dictionary lines, if any, came with it).
    fn take_records(&mut self, all: bool) {
        let pending = std::mem::take(&mut self.pending);
        let mut start = 0;
        for at in 0..pending.len() {
            let ends_record = pending[at] == b'\n'
                && match pending.get(at + 1) {
                    Some(&next) => next != b' ',
                    None => all,
                };
            if ends_record {
                self.record(&pending[start..=at]);
                start = at + 1;
            }
        }
        let rest = &pending[start..];
        if all && !rest.is_empty() {
            self.record(rest);
        } else {
            self.pending = rest.to_vec();
        }
    }

    fn record(&mut self, bytes: &[u8]) {
        let Some(record) = parse_record(&String::from_utf8_lossy(bytes)) else { return };
        if self.newest.is_none_or(|n| record.seq > n) {
            self.newest = Some(record.seq);
            self.newest_usec = record.usec;
        }
        if let Some((marker, seen @ None)) = &mut self.marker {
            if record.text == *marker {
                *seen = Some(record.seq);
            }
        }
        if record.text.starts_with(MARKER_PREFIX) || !self.concerns(&record) {
            return;
        }
        if self.kept.len() >= KEPT_LINES {
            self.kept.pop_front();
        }
        let flag = flag_of(&record.text, record.priority);
        self.kept.push_back(KernelLine {
            seq: record.seq,
            usec: record.usec,
            priority: record.priority,
            text: record.text,
            flag,
        });
    }

    fn concerns(&mut self, record: &Record) -> bool {
        if mentions_controller(&record.text, &self.controller) {
            // The driver names the PCI function when it binds: "nvme nvme0: pci function 0000:01:00.0".
            if self.pci.is_none() {
                if let Some((_, rest)) = record.text.split_once("pci function ") {
                    self.pci = rest.split_whitespace().next().map(str::to_owned);
                }
            }
            return true;
        }
        let Some(pci) = &self.pci else { return false };
        record.device.as_deref().is_some_and(|d| d.strip_prefix("+pci:") == Some(pci.as_str()))
            || contains_word(&record.text, pci, |c| c.is_ascii_hexdigit() || c == ':' || c == '.')
    }
}

/// A parsed record, before it is judged.
#[derive(Debug, PartialEq, Eq)]
struct Record {
    seq: u64,
    usec: u64,
    priority: u8,
    text: String,
    /// The dictionary's DEVICE value ("+pci:0000:01:00.0", "c242:0").
    device: Option<String>,
}

/// One record: `PRIO,SEQ,USEC,FLAGS[,…];TEXT\n` and dictionary lines ` KEY=VALUE\n`.
/// `None` for anything else.
fn parse_record(record: &str) -> Option<Record> {
    let mut lines = record.split('\n');
    let (header, text) = lines.next()?.split_once(';')?;
    let mut fields = header.split(',');
    let prio: u32 = fields.next()?.parse().ok()?;
    let seq = fields.next()?.parse().ok()?;
    let usec = fields.next()?.parse().ok()?;
    fields.next()?;
    let device = lines.filter_map(|l| l.strip_prefix(' ')?.strip_prefix("DEVICE=")).next().map(str::to_owned);
    Some(Record { seq, usec, priority: (prio & 7) as u8, text: text.to_owned(), device })
}

/// "nvme" and a number.
fn is_controller_name(name: &str) -> bool {
    name.strip_prefix("nvme").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `text` names the controller or one of its namespaces or paths: `nvme0` not
/// inside a longer word and not followed by a digit (`nvme0:`, `nvme0n1`, `nvme0c1n1`,
/// `nvme0n1p2`; never `nvme01` or `xnvme0`).
fn mentions_controller(text: &str, controller: &str) -> bool {
    contains_word(text, controller, |c| c.is_ascii_digit())
}

/// Whether `word` occurs in `text` with no letter, digit or `_` before it and no
/// character for which `continues` holds after it.
fn contains_word(text: &str, word: &str, continues: impl Fn(char) -> bool) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_') && !after.is_some_and(&continues)
    })
}

/// The flag of a controller's line, from the short phrases of the driver's messages.
fn flag_of(text: &str, priority: u8) -> Option<Flag> {
    let lower = text.to_ascii_lowercase();
    let has = |phrases: &[&str]| phrases.iter().any(|p| lower.contains(p));
    if has(&["removing after probe failure", "disabling device after reset failure", "removing ctrl"]) {
        return Some(Flag::Removed);
    }
    // "timeout," as in "… QID 2 timeout, aborting" / ", reset controller"; never
    // "Shutdown timeout set to 10 seconds".
    if has(&["timeout,", "timed out"]) || lower.trim_end().ends_with(" timeout") {
        return Some(Flag::Timeout);
    }
    if has(&["resetting controller", "reset controller", "will reset", "controller is down", "slot reset"]) {
        return Some(Flag::Reset);
    }
    let error = has(&["i/o cmd(", "admin cmd(", "i/o error", "abort status", "cancelling i/o", "failed", "error"]);
    if error || priority <= 3 {
        return Some(Flag::Other);
    }
    None
}

/// A marker's text as the kernel will show it unescaped: printable ASCII but `\`.
fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\r' | '\t' => ' ',
            ' '..='~' if c != '\\' => c,
            _ => '?',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake kernel log: a regular file of records in a temporary directory.
    struct Fake {
        _dir: tempfile::TempDir,
        path: PathBuf,
    }

    impl Fake {
        fn new(records: &str) -> Fake {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("kmsg");
            std::fs::write(&path, records).unwrap();
            Fake { _dir: dir, path }
        }

        fn append(&self, records: &str) {
            let mut file = OpenOptions::new().append(true).open(&self.path).unwrap();
            file.write_all(records.as_bytes()).unwrap();
        }
    }

    const BOOT: &str = "\
6,0,0,-;Linux version 6.1.0\n\
6,1,1200345,-;nvme nvme0: pci function 0000:01:00.0\n\
 SUBSYSTEM=pci\n\
 DEVICE=+pci:0000:01:00.0\n\
6,2,1300000,-;nvme nvme1: pci function 0000:02:00.0\n\
6,3,1400000,-;nvme nvme0: 8/0/0 default/read/poll queues\n\
6,4,1400100,-; nvme0n1: p1 p2\n\
6,5,1500000,-;nvme nvme10: Shutdown timeout set to 10 seconds\n\
4,6,1600000,-;pcieport 0000:00:1c.0: AER: Corrected error received: 0000:01:00.0\n\
6,7,1700000,-;EXT4-fs (nvme0n1p1): mounted filesystem\n";

    fn texts(lines: &[KernelLine]) -> Vec<(u64, &str)> {
        lines.iter().map(|l| (l.seq, l.text.as_str())).collect()
    }

    #[test]
    fn records_parse_with_their_dictionary_and_levels() {
        let record =
            parse_record("14,17,4294967,-,caller=T1;text; with semicolon\n SUBSYSTEM=pci\n DEVICE=+pci:0000:01:00.0\n");
        let expected = Record {
            seq: 17,
            usec: 4294967,
            priority: 6,
            text: "text; with semicolon".to_owned(),
            device: Some("+pci:0000:01:00.0".to_owned()),
        };
        assert_eq!(record, Some(expected));
        for garbled in ["", "no header", "6,x,0,-;text\n", "6,1,0;missing flags\n", "6,1;short\n", ";\n"] {
            assert_eq!(parse_record(garbled), None, "{garbled:?}");
        }
    }

    #[test]
    fn only_the_controllers_lines_are_kept() {
        let fake = Fake::new(BOOT);
        let mut log = KernelLog::with_pci_address(&fake.path, "nvme0", None).unwrap();
        assert_eq!(log.cursor(), 7);
        let lines = log.since(0);
        // The PCI address was learned from the driver's "pci function" line, so the
        // AER line naming it counts too.
        assert_eq!(
            texts(&lines),
            [
                (1, "nvme nvme0: pci function 0000:01:00.0"),
                (3, "nvme nvme0: 8/0/0 default/read/poll queues"),
                (4, " nvme0n1: p1 p2"),
                (6, "pcieport 0000:00:1c.0: AER: Corrected error received: 0000:01:00.0"),
                (7, "EXT4-fs (nvme0n1p1): mounted filesystem"),
            ]
        );
        let all = KernelLog::with_pci_address(&fake.path, "nvme0", None).unwrap().since(u64::MAX);
        assert!(all.is_empty());

        let mut other = KernelLog::with_pci_address(&fake.path, "nvme1", None).unwrap();
        assert_eq!(texts(&other.since(0)), [(2, "nvme nvme1: pci function 0000:02:00.0")]);
        // A given address counts from the first record (matched by the dictionary's
        // DEVICE or the text), even for lines that name no controller.
        let mut given = KernelLog::with_pci_address(&fake.path, "nvme1", Some("0000:01:00.0")).unwrap();
        assert_eq!(given.since(0).iter().map(|l| l.seq).collect::<Vec<_>>(), [1, 2, 6]);
        let mut prefix = KernelLog::with_pci_address(&fake.path, "nvme1", Some("0000:01:00")).unwrap();
        assert_eq!(prefix.since(0).len(), 1, "an address is matched whole");
        let mut ten = KernelLog::with_pci_address(&fake.path, "nvme10", None).unwrap();
        assert_eq!(ten.since(0).len(), 1);
        assert_eq!(ten.since(0)[0].flag, None, "a shutdown timeout setting is no timeout");
    }

    #[test]
    fn word_matching_never_takes_another_controller() {
        for (text, yes) in [
            ("nvme nvme0: resetting", true),
            ("dev nvme0n1, sector 0", true),
            ("nvme0c1n1: path", true),
            ("/dev/nvme0", true),
            ("nvme nvme01: x", false),
            ("nvme nvme10: x", false),
            ("xnvme0: x", false),
            ("nvme_0", false),
        ] {
            assert_eq!(mentions_controller(text, "nvme0"), yes, "{text}");
        }
    }

    #[test]
    fn the_drivers_messages_are_flagged() {
        for (text, priority, flag) in [
            (
                "nvme nvme0: I/O tag 12 (000c) opcode 0x2 (Read) QID 3 timeout, aborting req_op:READ(0) size:4096",
                4,
                Some(Flag::Timeout),
            ),
            ("nvme nvme0: I/O 5 QID 1 timeout, reset controller", 4, Some(Flag::Timeout)),
            ("nvme nvme0: Admin Cmd timed out", 4, Some(Flag::Timeout)),
            ("nvme nvme0: controller is down; will reset: CSTS=0x3, PCI_STATUS=0x10", 4, Some(Flag::Reset)),
            ("nvme nvme0: resetting controller", 4, Some(Flag::Reset)),
            ("nvme nvme0: Removing after probe failure status: -19", 4, Some(Flag::Removed)),
            ("nvme nvme0: Disabling device after reset failure: -19", 4, Some(Flag::Removed)),
            (
                "nvme0n1: I/O Cmd(0x2) @ LBA 0, 8 blocks, Invalid Field in Command (sct 0x0 / sc 0x2)",
                4,
                Some(Flag::Other),
            ),
            ("nvme nvme0: Admin Cmd(0x6), Invalid Field in Command (sct 0x0 / sc 0x2) DNR", 4, Some(Flag::Other)),
            ("I/O error, dev nvme0n1, sector 2048 op 0x0:(READ)", 3, Some(Flag::Other)),
            ("nvme nvme0: something the driver calls an error-level message", 3, Some(Flag::Other)),
            ("nvme nvme0: Shutdown timeout set to 8 seconds", 6, None),
            ("nvme nvme0: 8/0/0 default/read/poll queues", 6, None),
        ] {
            assert_eq!(flag_of(text, priority), flag, "{text}");
        }
    }

    #[test]
    fn cursors_and_markers_divide_the_log() {
        let fake = Fake::new(BOOT);
        let mut log = KernelLog::with_pci_address(&fake.path, "nvme0", None).unwrap();
        let mark = log.mark("case trim::x/lbads=512\nstarted \\ é").unwrap();
        assert_eq!(mark, 8);
        let written = std::fs::read_to_string(&fake.path).unwrap();
        assert!(written.ends_with("12,8,1700000,-;nvtest: case trim::x/lbads=512 started ? ?\n"), "{written}");
        assert!(log.since(0).iter().all(|l| !l.text.starts_with(MARKER_PREFIX)), "a marker is no kernel line");
        assert!(log.since(mark).is_empty());

        // Records arriving later are read on the next call; one of them broken.
        fake.append("4,9,1800000,-;nvme nvme0: I/O 7 QID 2 timeout, aborting\n");
        fake.append("garbage line\n6,10,1800100,-;nvme nvme1: resetting controller\n");
        let cursor = log.cursor();
        assert_eq!(cursor, 10);
        fake.append("4,11,1900000,-;nvme nvme0: resetting controller\n SUBSYSTEM=nvme\n DEVICE=c242:0\n");
        let after_mark = log.since(mark);
        assert_eq!(
            texts(&after_mark),
            [(9, "nvme nvme0: I/O 7 QID 2 timeout, aborting"), (11, "nvme nvme0: resetting controller")]
        );
        assert_eq!(after_mark[0].flag, Some(Flag::Timeout));
        assert_eq!(after_mark[0].priority, 4);
        assert_eq!(after_mark[0].to_string(), "[    1.800000] nvme nvme0: I/O 7 QID 2 timeout, aborting (timeout)");
        assert_eq!(texts(&log.since(cursor)), [(11, "nvme nvme0: resetting controller")]);
        assert_eq!(log.since(cursor)[0].flag, Some(Flag::Reset));
        assert_eq!(log.missed(), 0);
    }

    #[test]
    fn a_record_split_across_reads_is_parsed_whole() {
        let fake = Fake::new("");
        let mut log = KernelLog::with_pci_address(&fake.path, "nvme0", None).unwrap();
        assert_eq!(log.cursor(), 0);
        assert!(log.since(0).is_empty());
        assert_eq!(log.mark("first").unwrap(), 0, "the first record of an empty log");
        fake.append("6,1,5,-;nvme nvme0: half");
        // The unfinished record is parsed as it stands when nothing more comes...
        assert_eq!(texts(&log.since(0)), [(1, "nvme nvme0: half")]);
        fake.append(" more\n");
        // ... and what follows is not a record of its own.
        assert_eq!(log.since(0).len(), 1);
        assert_eq!(log.cursor(), 1);
    }

    #[test]
    fn errors_are_one_line() {
        let e = KernelLog::open(Path::new("/nonexistent/kmsg"), "nvme0").err().unwrap();
        assert!(e.starts_with("cannot read the kernel log /nonexistent/kmsg: ") && !e.contains('\n'), "{e}");
        let fake = Fake::new(BOOT);
        let e = KernelLog::open(&fake.path, "sda").err().unwrap();
        assert_eq!(e, "\"sda\" is not an NVMe controller's name (nvme0, nvme1, …)");
    }

    /// The real kernel log of this machine: a marker written is read back, in order.
    /// Skips (saying why) where /dev/kmsg cannot be written, as in most containers.
    #[test]
    fn the_real_kernel_log_shows_our_markers_in_order() {
        let path = Path::new("/dev/kmsg");
        if let Err(e) = OpenOptions::new().write(true).open(path) {
            eprintln!("skipped: /dev/kmsg cannot be opened for writing here: {e}");
            return;
        }
        let mut log = match KernelLog::open(path, "nvme0") {
            Ok(log) => log,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        let before = log.cursor();
        let tag = format!("kmsg self-test {} {:?}", std::process::id(), Instant::now());
        let first = log.mark(&format!("{tag} one")).unwrap();
        let second = log.mark(&format!("{tag} two")).unwrap();
        assert!(before < first && first < second, "{before} {first} {second}");
        assert!(log.cursor() >= second);
        assert!(log.since(before).iter().all(|l| !l.text.contains(&tag)), "markers are not the controller's lines");
    }
}
