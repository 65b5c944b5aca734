//! A connected UNIX stream socket read line by line, where every wait is bounded.
//!
//! Both QEMU protocols nvtest speaks (qtest and QMP) are line based. This type owns the
//! socket, its receive buffer and the only blocking points (`poll(2)` with a deadline),
//! so neither protocol can hang on a QEMU that stopped answering. Sends use
//! `MSG_NOSIGNAL`: a QEMU that died gives an error value, never a SIGPIPE.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Instant;

/// Why a line could not be read or sent.
#[derive(Debug)]
pub(crate) enum WaitError {
    /// The peer closed the connection (QEMU exited).
    Closed,
    /// The deadline passed first.
    Timeout,
    Io(io::Error),
}

/// How long [`LineSocket::read_line`] may wait for a complete line.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    /// Only what has already arrived: `Ok(None)` when no complete line is there.
    Never,
    Until(Instant),
}

pub(crate) struct LineSocket {
    stream: UnixStream,
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    start: usize,
}

impl LineSocket {
    pub(crate) fn new(stream: UnixStream) -> Self {
        LineSocket { stream, buf: Vec::with_capacity(16 * 1024), start: 0 }
    }

    /// Sends all of `bytes`, waiting for buffer space at most until `deadline`.
    pub(crate) fn send(&mut self, mut bytes: &[u8], deadline: Instant) -> Result<(), WaitError> {
        let fd = self.stream.as_raw_fd();
        while !bytes.is_empty() {
            // SAFETY: `bytes` is a valid buffer for its length; the fd is owned by `stream`.
            let n =
                unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
            if n >= 0 {
                bytes = &bytes[n as usize..];
                continue;
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => self.wait_for(libc::POLLOUT, deadline)?,
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => return Err(WaitError::Closed),
                _ => return Err(WaitError::Io(err)),
            }
        }
        Ok(())
    }

    /// The next complete line without its line end (`\n`, and a `\r` before it).
    pub(crate) fn read_line(&mut self, wait: Wait) -> Result<Option<&str>, WaitError> {
        if self.start > 0 && (self.start == self.buf.len() || self.start >= 64 * 1024) {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        loop {
            if let Some(pos) = self.buf[self.start..].iter().position(|&b| b == b'\n') {
                let begin = self.start;
                let mut end = begin + pos;
                self.start = end + 1;
                if end > begin && self.buf[end - 1] == b'\r' {
                    end -= 1;
                }
                return match std::str::from_utf8(&self.buf[begin..end]) {
                    Ok(line) => Ok(Some(line)),
                    Err(e) => Err(WaitError::Io(io::Error::new(io::ErrorKind::InvalidData, e))),
                };
            }
            if !self.receive()? {
                match wait {
                    Wait::Never => return Ok(None),
                    Wait::Until(deadline) => self.wait_for(libc::POLLIN, deadline)?,
                }
            }
        }
    }

    /// Notices, without waiting, a peer that closed the connection. Whatever has
    /// arrived stays buffered for [`Self::read_line`].
    pub(crate) fn check_open(&mut self) -> Result<(), WaitError> {
        self.receive().map(|_| ())
    }

    /// Appends whatever has arrived to the buffer. `Ok(false)`: nothing there yet.
    fn receive(&mut self) -> Result<bool, WaitError> {
        let mut chunk = [0u8; 8192];
        loop {
            // SAFETY: `chunk` is a valid writable buffer of its length.
            let n = unsafe {
                libc::recv(self.stream.as_raw_fd(), chunk.as_mut_ptr().cast(), chunk.len(), libc::MSG_DONTWAIT)
            };
            if n > 0 {
                self.buf.extend_from_slice(&chunk[..n as usize]);
                return Ok(true);
            }
            if n == 0 {
                return Err(WaitError::Closed);
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => return Ok(false),
                io::ErrorKind::ConnectionReset => return Err(WaitError::Closed),
                _ => return Err(WaitError::Io(err)),
            }
        }
    }

    /// Waits until the socket is ready for `events` (or closed), at most until `deadline`.
    fn wait_for(&self, events: libc::c_short, deadline: Instant) -> Result<(), WaitError> {
        wait_fd(self.stream.as_raw_fd(), events, deadline)
    }
}

/// Waits until `fd` is ready for `events`, hung up, or in error; `Timeout` at `deadline`.
pub(crate) fn wait_fd(fd: libc::c_int, events: libc::c_short, deadline: Instant) -> Result<(), WaitError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(WaitError::Timeout);
        }
        // Round up so a wait never ends just before its deadline and spins.
        let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
        let mut pfd = libc::pollfd { fd, events, revents: 0 };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n > 0 {
            return Ok(());
        }
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(WaitError::Io(err));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    #[test]
    fn lines_are_split_and_partial_lines_wait() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut sock = LineSocket::new(a);
        b.write_all(b"OK\r\nOK 0x1f\nIRQ ra").unwrap();
        let soon = || Wait::Until(Instant::now() + Duration::from_millis(200));
        assert_eq!(sock.read_line(soon()).unwrap(), Some("OK"));
        assert_eq!(sock.read_line(soon()).unwrap(), Some("OK 0x1f"));
        assert!(matches!(sock.read_line(Wait::Never), Ok(None)));
        assert!(matches!(sock.read_line(soon()), Err(WaitError::Timeout)));
        b.write_all(b"ise 3\n").unwrap();
        assert_eq!(sock.read_line(soon()).unwrap(), Some("IRQ raise 3"));
        drop(b);
        assert!(matches!(sock.read_line(soon()), Err(WaitError::Closed)));
        assert!(matches!(sock.send(b"x\n", Instant::now() + Duration::from_millis(200)), Err(WaitError::Closed)));
    }
}
