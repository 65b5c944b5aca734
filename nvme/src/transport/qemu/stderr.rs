//! QEMU's stderr, captured through a pipe into memory.
//!
//! Not a file in the machine's temporary directory: that directory holds the disk
//! images, so when its filesystem fills up QEMU's `aio failed: No space left on device`
//! could not be written there (measured: every write(2) of the line failed with
//! ENOSPC), and nvtest would lose exactly the line that says what happened.
//!
//! A watcher thread drains the pipe as QEMU writes, so QEMU never blocks on a full
//! pipe; every reader drains it too, under the same lock, before it looks: a line QEMU
//! wrote before the reader asked (QEMU reports a failed I/O before it posts the
//! command's completion) is always seen.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};

/// Lines kept; older ones are dropped (a cursor past them just skips them).
const MAX_LINES: usize = 10_000;
/// Characters kept of one line.
const MAX_LINE_CHARS: usize = 4096;

/// QEMU's stderr lines so far, shared by the watcher thread and the machine.
#[derive(Clone)]
pub(crate) struct StderrLog {
    capture: Arc<Mutex<Capture>>,
}

struct Capture {
    /// The pipe's read end (non-blocking); closed by the watcher thread at end of file.
    pipe: Option<File>,
    eof: bool,
    /// Bytes after the last newline.
    partial: Vec<u8>,
    lines: VecDeque<String>,
    /// Lines dropped from the front: `dropped + i` is the number of line `i`.
    dropped: u64,
}

impl StderrLog {
    /// A log with nothing in it and nothing to read (QEMU's stderr was not piped).
    pub(crate) fn empty() -> StderrLog {
        let capture = Capture { pipe: None, eof: true, partial: Vec::new(), lines: VecDeque::new(), dropped: 0 };
        StderrLog { capture: Arc::new(Mutex::new(capture)) }
    }

    /// Captures the read end of QEMU's stderr pipe, with a watcher thread draining it.
    pub(crate) fn capture(pipe: impl Into<OwnedFd>) -> io::Result<StderrLog> {
        let file = File::from(pipe.into());
        let fd = file.as_raw_fd();
        set_nonblocking(fd)?;
        let log = StderrLog::empty();
        {
            let mut capture = log.lock();
            capture.pipe = Some(file);
            capture.eof = false;
        }
        let watched = log.clone();
        std::thread::Builder::new().name("nvtest-qemu-stderr".into()).spawn(move || watched.watch(fd))?;
        Ok(log)
    }

    /// Goes on capturing into this log from `pipe`, the stderr of a QEMU started again
    /// after the last one exited (a power cycle): line numbers and every reader's cursor
    /// carry on. Waits (at most two seconds) for the watcher of the previous pipe to see
    /// its end, since only that thread may close it.
    pub(crate) fn resume(&self, pipe: impl Into<OwnedFd>) -> io::Result<()> {
        let file = File::from(pipe.into());
        let fd = file.as_raw_fd();
        set_nonblocking(fd)?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut file = Some(file);
        while file.is_some() {
            {
                let mut capture = self.lock();
                capture.drain();
                if capture.pipe.is_none() {
                    capture.pipe = file.take();
                    capture.eof = false;
                    continue;
                }
            }
            if std::time::Instant::now() >= deadline {
                return Err(io::Error::other("the previous QEMU's stderr is still open"));
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let watched = self.clone();
        std::thread::Builder::new().name("nvtest-qemu-stderr".into()).spawn(move || watched.watch(fd))?;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Capture> {
        // Every change to the capture is complete before anything in it can panic.
        self.capture.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The watcher thread: waits for data, drains it, and at end of file closes the
    /// pipe and ends. Only this thread closes the pipe, so `fd` stays valid here.
    fn watch(&self, fd: RawFd) {
        loop {
            let mut poll = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: plain syscall on one valid pollfd; `fd` is open until this thread closes it.
            let ready = unsafe { libc::poll(&mut poll, 1, -1) };
            if ready < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break;
            }
            let mut capture = self.lock();
            capture.drain();
            if capture.eof {
                capture.pipe = None;
                return;
            }
        }
        let mut capture = self.lock();
        capture.finish();
        capture.pipe = None;
    }

    /// Lines after line number `cursor` (lines dropped meanwhile are skipped), and
    /// moves `cursor` past them.
    pub(crate) fn lines_since(&self, cursor: &mut u64) -> Vec<String> {
        let mut capture = self.lock();
        capture.drain();
        let skip = cursor.saturating_sub(capture.dropped) as usize;
        let lines: Vec<String> = capture.lines.iter().skip(skip).cloned().collect();
        *cursor = capture.dropped + capture.lines.len() as u64;
        lines
    }

    /// The last (at most 20) non-empty lines joined with ` | `, for error messages.
    pub(crate) fn tail(&self) -> String {
        let mut capture = self.lock();
        capture.drain();
        let lines: Vec<&str> = capture.lines.iter().map(|l| l.as_str()).filter(|l| !l.trim().is_empty()).collect();
        if lines.is_empty() {
            return "(QEMU wrote nothing to stderr)".to_owned();
        }
        lines[lines.len().saturating_sub(20)..].join(" | ")
    }
}

impl Capture {
    /// Reads whatever the pipe holds now, without waiting.
    fn drain(&mut self) {
        let mut buf = [0u8; 16 * 1024];
        while !self.eof {
            let Some(pipe) = self.pipe.as_mut() else { return };
            match pipe.read(&mut buf) {
                Ok(0) => self.finish(),
                Ok(n) => self.push(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.push_line(format!("(nvtest stopped reading QEMU's stderr: {e})"));
                    self.finish();
                }
            }
        }
    }

    /// Takes bytes QEMU wrote: complete lines are kept, the rest waits for its newline.
    fn push(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            self.push_line(String::from_utf8_lossy(&line[..end]).into_owned());
        }
    }

    /// End of file: an unterminated last line counts as a line.
    fn finish(&mut self) {
        self.eof = true;
        if !self.partial.is_empty() {
            let line = String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned();
            self.push_line(line);
        }
    }

    fn push_line(&mut self, mut line: String) {
        if let Some((cut, _)) = line.char_indices().nth(MAX_LINE_CHARS) {
            line.truncate(cut);
        }
        self.lines.push_back(line);
        if self.lines.len() > MAX_LINES {
            self.lines.pop_front();
            self.dropped += 1;
        }
    }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain fcntl calls on a descriptor this module owns.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// The log of a shell script's stderr, once the script has ended.
    pub(crate) fn log_of(script: &str) -> StderrLog {
        let mut child = Command::new("sh").args(["-c", script]).stderr(Stdio::piped()).spawn().unwrap();
        let log = StderrLog::capture(child.stderr.take().unwrap()).unwrap();
        child.wait().unwrap();
        log
    }

    #[test]
    fn the_tail_keeps_the_last_lines() {
        assert_eq!(StderrLog::empty().tail(), "(QEMU wrote nothing to stderr)");
        let log = log_of("i=0; while [ $i -lt 30 ]; do echo \"line $i\" >&2; i=$((i+1)); done");
        let tail = log.tail();
        assert!(tail.starts_with("line 10 | "), "{tail}");
        assert!(tail.ends_with("line 29"), "{tail}");
    }

    #[test]
    fn each_cursor_sees_every_line_once_and_a_last_line_without_newline() {
        let log = log_of("printf 'qemu: a\\nqemu: ' >&2; printf 'b\\nc' >&2");
        let (mut first, mut second) = (0, 0);
        assert_eq!(log.lines_since(&mut first), ["qemu: a", "qemu: b", "c"]);
        assert_eq!(log.lines_since(&mut first), Vec::<String>::new());
        assert_eq!(log.lines_since(&mut second), ["qemu: a", "qemu: b", "c"]);
    }

    #[test]
    fn old_lines_are_dropped_beyond_the_bound() {
        let mut capture = Capture { pipe: None, eof: true, partial: Vec::new(), lines: VecDeque::new(), dropped: 0 };
        for i in 0..MAX_LINES + 5 {
            capture.push(format!("{i}\n").as_bytes());
        }
        assert_eq!((capture.dropped, capture.lines.len()), (5, MAX_LINES));
        assert_eq!(capture.lines.front().map(String::as_str), Some("5"));
    }
}
