//! The qtest line protocol (QEMU `-qtest`): port I/O and physical memory access.
//!
//! nvtest only sends the few commands of [`Op`], each formatted here from numbers, so
//! every line is well formed (QEMU's qtest server aborts the whole process on a
//! malformed one). Replies are `OK`, `OK <value>` or `FAIL …`; asynchronous `IRQ …`
//! lines may come between them and are skipped.
//!
//! Writes are posted, as PCI memory writes are: a write is sent at once and its `OK`
//! is collected later — before the reply of the next read (replies come in order), in
//! [`Qtest::drain`] while the host polls, or when [`MAX_POSTED`] are outstanding. A
//! doorbell write then costs one `send(2)` instead of a round trip through QEMU's main
//! loop.

use std::collections::VecDeque;
use std::fmt::{self, Write as _};
use std::time::{Duration, Instant};

use super::socket::{LineSocket, Wait, WaitError};

/// At most this many writes wait for their `OK` before a write blocks to collect them.
pub(crate) const MAX_POSTED: usize = 256;

/// One qtest request. Addresses are guest physical (memory) or I/O ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Outl { port: u16, value: u32 },
    Inl { port: u16 },
    Readl { addr: u64 },
    Readq { addr: u64 },
    Writel { addr: u64, value: u32 },
    Writeq { addr: u64, value: u64 },
}

impl fmt::Display for Op {
    /// The request line, without its newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Op::Outl { port, value } => write!(f, "outl {port:#x} {value:#x}"),
            Op::Inl { port } => write!(f, "inl {port:#x}"),
            Op::Readl { addr } => write!(f, "readl {addr:#x}"),
            Op::Readq { addr } => write!(f, "readq {addr:#x}"),
            Op::Writel { addr, value } => write!(f, "writel {addr:#x} {value:#x}"),
            Op::Writeq { addr, value } => write!(f, "writeq {addr:#x} {value:#x}"),
        }
    }
}

impl Op {
    fn returns_value(&self) -> bool {
        matches!(self, Op::Inl { .. } | Op::Readl { .. } | Op::Readq { .. })
    }
}

/// Why a qtest request failed.
#[derive(Debug)]
pub(crate) enum QtestError {
    /// The socket closed or broke: QEMU is gone.
    Closed { during: String, cause: Option<std::io::Error> },
    /// No reply in time. The stream is out of step from here on.
    Timeout { during: String },
    /// QEMU answered something other than what the request allows.
    Reply { during: String, line: String },
}

pub(crate) struct Qtest {
    sock: LineSocket,
    posted: VecDeque<Op>,
    timeout: Duration,
    line: String,
    stats: QtestStats,
    /// When [`Qtest::drain`] last looked for a closed connection with nothing posted.
    last_check: Instant,
}

/// How often [`Qtest::drain`] looks for a QEMU that went away while nothing is posted.
const LIVENESS_CHECK: Duration = Duration::from_millis(1);

/// How many qtest requests were sent, by kind: what a workload costs in socket traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QtestStats {
    /// Requests whose reply was waited for (reads): one round trip through QEMU each.
    pub round_trips: u64,
    /// Writes sent without waiting (their `OK` is collected later).
    pub posted_writes: u64,
}

impl Qtest {
    pub(crate) fn new(sock: LineSocket, timeout: Duration) -> Self {
        Qtest {
            sock,
            posted: VecDeque::new(),
            timeout,
            line: String::with_capacity(64),
            stats: QtestStats::default(),
            last_check: Instant::now(),
        }
    }

    pub(crate) fn stats(&self) -> QtestStats {
        self.stats
    }

    /// Sends a write without waiting for its `OK`.
    pub(crate) fn post(&mut self, op: Op) -> Result<(), QtestError> {
        debug_assert!(!op.returns_value());
        if self.posted.len() >= MAX_POSTED {
            self.settle()?;
        }
        self.send(op)?;
        self.posted.push_back(op);
        self.stats.posted_writes += 1;
        Ok(())
    }

    /// Sends `op` and waits for its reply: the value read, or 0 for a write.
    pub(crate) fn call(&mut self, op: Op) -> Result<u64, QtestError> {
        self.send(op)?;
        self.stats.round_trips += 1;
        let deadline = Instant::now() + self.timeout;
        while let Some(posted) = self.posted.front().copied() {
            self.expect_reply(posted, deadline)?;
            self.posted.pop_front();
        }
        Ok(self.expect_reply(op, deadline)?.unwrap_or(0))
    }

    /// Waits for the `OK` of every posted write.
    pub(crate) fn settle(&mut self) -> Result<(), QtestError> {
        let deadline = Instant::now() + self.timeout;
        while let Some(posted) = self.posted.front().copied() {
            self.expect_reply(posted, deadline)?;
            self.posted.pop_front();
        }
        Ok(())
    }

    /// Collects the replies to posted writes that have already arrived; never waits.
    /// With nothing posted, it still notices (at most every [`LIVENESS_CHECK`]) a QEMU
    /// that closed the connection, so a host polling memory learns QEMU died.
    pub(crate) fn drain(&mut self) -> Result<(), QtestError> {
        if self.posted.is_empty() && self.last_check.elapsed() >= LIVENESS_CHECK {
            self.last_check = Instant::now();
            self.sock.check_open().map_err(|e| wait_error(e, "checking that QEMU is there".to_owned()))?;
        }
        while let Some(posted) = self.posted.front().copied() {
            match self.next_reply(posted, Wait::Never)? {
                Reply::NotYet => break,
                Reply::Arrived(_) => {
                    self.posted.pop_front();
                }
            }
        }
        Ok(())
    }

    fn send(&mut self, op: Op) -> Result<(), QtestError> {
        self.line.clear();
        // Writing to a String cannot fail.
        let _ = writeln!(self.line, "{op}");
        let deadline = Instant::now() + self.timeout;
        self.sock.send(self.line.as_bytes(), deadline).map_err(|e| wait_error(e, op.to_string()))
    }

    fn expect_reply(&mut self, op: Op, deadline: Instant) -> Result<Option<u64>, QtestError> {
        match self.next_reply(op, Wait::Until(deadline))? {
            Reply::Arrived(value) => Ok(value),
            // A bounded wait returns a line or an error, never `NotYet`.
            Reply::NotYet => Err(QtestError::Timeout { during: op.to_string() }),
        }
    }

    /// Reads and checks the next reply, skipping asynchronous `IRQ` notices.
    fn next_reply(&mut self, op: Op, wait: Wait) -> Result<Reply, QtestError> {
        loop {
            match self.sock.read_line(wait).map_err(|e| wait_error(e, op.to_string()))? {
                Some(line) if line.starts_with("IRQ ") => continue,
                Some(line) => return check_reply(op, line).map(Reply::Arrived),
                None => return Ok(Reply::NotYet),
            }
        }
    }
}

enum Reply {
    NotYet,
    Arrived(Option<u64>),
}

fn wait_error(e: WaitError, during: String) -> QtestError {
    match e {
        WaitError::Closed => QtestError::Closed { during, cause: None },
        WaitError::Timeout => QtestError::Timeout { during },
        WaitError::Io(cause) => QtestError::Closed { during, cause: Some(cause) },
    }
}

/// Checks a reply line against the request: `OK` for a write, `OK 0x<hex>` for a read.
fn check_reply(op: Op, line: &str) -> Result<Option<u64>, QtestError> {
    let bad = || QtestError::Reply { during: op.to_string(), line: line.to_owned() };
    let mut words = line.split(' ');
    if words.next() != Some("OK") {
        return Err(bad());
    }
    let value = match words.next() {
        None => None,
        Some(word) => {
            let hex = word.strip_prefix("0x").ok_or_else(bad)?;
            Some(u64::from_str_radix(hex, 16).map_err(|_| bad())?)
        }
    };
    if words.next().is_some() || value.is_some() != op.returns_value() {
        return Err(bad());
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;

    #[test]
    fn requests_are_formatted_as_qtest_expects() {
        assert_eq!(Op::Outl { port: 0xcf8, value: 0x8000_0060 }.to_string(), "outl 0xcf8 0x80000060");
        assert_eq!(Op::Readq { addr: 0xc000_0000 }.to_string(), "readq 0xc0000000");
        assert_eq!(Op::Writel { addr: 0x1000, value: 0 }.to_string(), "writel 0x1000 0x0");
    }

    #[test]
    fn replies_must_match_their_request() {
        let readl = Op::Readl { addr: 0 };
        let writel = Op::Writel { addr: 0, value: 1 };
        assert_eq!(check_reply(readl, "OK 0x00000000deadbeef").unwrap(), Some(0xdead_beef));
        assert_eq!(check_reply(writel, "OK").unwrap(), None);
        assert!(check_reply(readl, "OK").is_err());
        assert!(check_reply(writel, "OK 0x1").is_err());
        assert!(check_reply(readl, "OK 0xzz").is_err());
        assert!(check_reply(writel, "FAIL Unknown command 'writel'").is_err());
    }

    /// A fake qtest server: answers `OK` to writes and `OK 0x2a` to reads, after an
    /// `IRQ` notice, so posted writes, skipped notices and ordering are all exercised.
    #[test]
    fn posted_writes_are_collected_before_the_next_read() {
        let (a, b) = UnixStream::pair().unwrap();
        let server = std::thread::spawn(move || {
            let mut out = b.try_clone().unwrap();
            let mut seen = Vec::new();
            for line in BufReader::new(b).lines() {
                let line = line.unwrap();
                let reply = if line.starts_with("read") { "IRQ raise 11\nOK 0x2a\n" } else { "OK\n" };
                out.write_all(reply.as_bytes()).unwrap();
                seen.push(line);
            }
            seen
        });
        let mut qt = Qtest::new(LineSocket::new(a), Duration::from_secs(5));
        for i in 0..3 {
            qt.post(Op::Writel { addr: 0x1000, value: i }).unwrap();
        }
        assert_eq!(qt.call(Op::Readl { addr: 0x1c }).unwrap(), 0x2a);
        assert!(qt.posted.is_empty());
        qt.post(Op::Writel { addr: 0x1004, value: 7 }).unwrap();
        qt.settle().unwrap();
        drop(qt);
        let seen = server.join().unwrap();
        assert_eq!(
            seen,
            ["writel 0x1000 0x0", "writel 0x1000 0x1", "writel 0x1000 0x2", "readl 0x1c", "writel 0x1004 0x7"]
        );
    }
}
