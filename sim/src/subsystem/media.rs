//! Sparse in-memory media: a byte-addressed store allocated lazily in 64 KiB chunks,
//! so a 64 GiB namespace costs nothing until it is written.
//!
//! A chunk never written reads as the media's fill byte (what DLFEAT says a deallocated
//! block reads as). Filling a whole chunk with that byte frees it again. The media knows
//! nothing of blocks or namespaces; [`super::namespace`] maps LBAs onto it.
//!
//! Chunks freed (a media dropped with its namespace, a chunk filled back) are kept for
//! the next media to take, up to [`SPARE_MAX`] chunks in the process: suites delete and
//! create namespaces case after case, and fresh memory costs a page fault and the
//! kernel's zeroing per 4 KiB on its first write (about half of the simulated drive's
//! time under a sequential write, `cargo bench -p nvtest --bench engine -- qos`); a
//! recycled chunk is set to the fill byte, or not at all when the write covers it whole.

use std::convert::Infallible;
use std::sync::Mutex;

/// Bytes per chunk.
pub const CHUNK: usize = 64 * 1024;

/// The most freed chunks kept for reuse (1 GiB).
pub const SPARE_MAX: usize = (1 << 30) / CHUNK;

/// Freed chunks, for the next media that needs one.
static SPARE: Mutex<Vec<Box<[u8]>>> = Mutex::new(Vec::new());

fn spare() -> std::sync::MutexGuard<'static, Vec<Box<[u8]>>> {
    SPARE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A chunk reading as `fill`, or, when `overwritten` (the caller writes all of it next),
/// holding anything.
fn new_chunk(fill: u8, overwritten: bool) -> Box<[u8]> {
    let recycled = spare().pop();
    match recycled {
        Some(mut chunk) => {
            if !overwritten {
                chunk.fill(fill);
            }
            chunk
        }
        None => vec![fill; CHUNK].into_boxed_slice(),
    }
}

/// Keeps freed chunks for reuse, up to [`SPARE_MAX`].
fn recycle(chunks: impl Iterator<Item = Box<[u8]>>) {
    let mut spare = spare();
    for chunk in chunks {
        if spare.len() >= SPARE_MAX {
            break;
        }
        spare.push(chunk);
    }
}

/// An access outside the media: a bug in the caller's range checks, reported as a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMedia {
    pub offset: u64,
    pub len: u64,
    pub size: u64,
}

/// A run of bytes a read produces: stored bytes, or `len` bytes of `fill` never stored.
pub enum Run<'a> {
    Bytes(&'a [u8]),
    Fill(u8, usize),
}

/// A sparse byte store of a fixed size.
pub struct Media {
    chunks: Vec<Option<Box<[u8]>>>,
    size: u64,
    fill: u8,
}

impl Media {
    /// `size` bytes, all reading as `fill` until written.
    pub fn new(size: u64, fill: u8) -> Media {
        let count = size.div_ceil(CHUNK as u64) as usize;
        let mut chunks = Vec::new();
        chunks.resize_with(count, || None);
        Media { chunks, size, fill }
    }

    /// Takes `old`'s stored chunks where they fall inside this media (quirk
    /// `create-keeps-old-media`).
    pub fn inherit(&mut self, mut old: Media) {
        for (mine, theirs) in self.chunks.iter_mut().zip(old.chunks.iter_mut()) {
            if theirs.is_some() {
                *mine = theirs.take();
            }
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The byte unwritten media reads as.
    pub fn fill_byte(&self) -> u8 {
        self.fill
    }

    /// Bytes of memory the stored chunks take.
    pub fn resident_bytes(&self) -> u64 {
        self.chunks.iter().filter(|c| c.is_some()).count() as u64 * CHUNK as u64
    }

    fn check(&self, offset: u64, len: u64) -> Result<(), OutOfMedia> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(OutOfMedia { offset, len, size: self.size }),
        }
    }

    /// Visits `len` bytes at `offset` as runs, in order, without copying them.
    pub fn read_runs<E>(
        &self,
        offset: u64,
        len: u64,
        visit: &mut dyn FnMut(Run<'_>) -> Result<(), E>,
    ) -> Result<Result<(), E>, OutOfMedia> {
        self.check(offset, len)?;
        for Piece { index, within, n, .. } in pieces(offset, len) {
            let run = match self.chunks.get(index).and_then(|c| c.as_deref()) {
                Some(chunk) => Run::Bytes(&chunk[within..within + n]),
                None => Run::Fill(self.fill, n),
            };
            if let Err(e) = visit(run) {
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    /// Copies `out.len()` bytes at `offset` into `out`.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), OutOfMedia> {
        let mut at = 0;
        let copied: Result<(), Infallible> = self.read_runs(offset, out.len() as u64, &mut |run| {
            match run {
                Run::Bytes(b) => {
                    out[at..at + b.len()].copy_from_slice(b);
                    at += b.len();
                }
                Run::Fill(byte, n) => {
                    out[at..at + n].fill(byte);
                    at += n;
                }
            }
            Ok(())
        })?;
        match copied {
            Ok(()) => Ok(()),
            Err(never) => match never {},
        }
    }

    /// Hands the writable bytes at `offset .. offset + len` to `fill_in`, chunk piece by
    /// chunk piece, allocating chunks as needed: `fill_in` writes every byte it is handed
    /// (a new chunk starts as the fill byte, except one handed over whole, which may hold
    /// anything until `fill_in` writes it; if `fill_in` fails there, it is set to the fill byte).
    pub fn write_runs<E>(
        &mut self,
        offset: u64,
        len: u64,
        fill_in: &mut dyn FnMut(&mut [u8]) -> Result<(), E>,
    ) -> Result<Result<(), E>, OutOfMedia> {
        self.check(offset, len)?;
        for Piece { index, within, n, .. } in pieces(offset, len) {
            let fill = self.fill;
            let Some(slot) = self.chunks.get_mut(index) else {
                return Err(OutOfMedia { offset, len, size: self.size });
            };
            let fresh = slot.is_none();
            let chunk = slot.get_or_insert_with(|| new_chunk(fill, n == CHUNK));
            if let Err(e) = fill_in(&mut chunk[within..within + n]) {
                if fresh && n == CHUNK {
                    // What the piece holds is unknown; never another media's old bytes.
                    chunk.fill(fill);
                }
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    /// Stores `data` at `offset`.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), OutOfMedia> {
        let mut at = 0;
        let done: Result<(), Infallible> = self.write_runs(offset, data.len() as u64, &mut |dst| {
            dst.copy_from_slice(&data[at..at + dst.len()]);
            at += dst.len();
            Ok(())
        })?;
        match done {
            Ok(()) => Ok(()),
            Err(never) => match never {},
        }
    }

    /// Sets `len` bytes at `offset` to `byte`. Whole chunks set to the fill byte are freed.
    pub fn fill(&mut self, offset: u64, len: u64, byte: u8) -> Result<(), OutOfMedia> {
        self.check(offset, len)?;
        for Piece { at, index, within, n } in pieces(offset, len) {
            let chunk_end = (index as u64 + 1) * CHUNK as u64;
            // A chunk covered to its end (or to the end of the media) is covered whole.
            let whole = within == 0 && (n == CHUNK || at + n as u64 == self.size.min(chunk_end));
            let fill = self.fill;
            if let Some(slot) = self.chunks.get_mut(index) {
                if byte == fill && (whole || slot.is_none()) {
                    if let Some(chunk) = slot.take() {
                        recycle(std::iter::once(chunk));
                    }
                } else {
                    let chunk = slot.get_or_insert_with(|| new_chunk(fill, false));
                    chunk[within..within + n].fill(byte);
                }
            }
        }
        Ok(())
    }
}

impl Drop for Media {
    fn drop(&mut self) {
        recycle(self.chunks.drain(..).flatten());
    }
}

/// The part of one chunk a byte range covers: `n` bytes from byte `within` of chunk
/// `index`, at media offset `at`.
struct Piece {
    at: u64,
    index: usize,
    within: usize,
    n: usize,
}

/// The pieces of `offset .. offset + len`, chunk by chunk, in order.
fn pieces(offset: u64, len: u64) -> impl Iterator<Item = Piece> {
    let end = offset + len;
    let mut at = offset;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let index = (at / CHUNK as u64) as usize;
        let within = (at % CHUNK as u64) as usize;
        let n = (CHUNK - within).min((end - at) as usize);
        let piece = Piece { at, index, within, n };
        at += n as u64;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritten_media_reads_the_fill_byte_and_costs_nothing() {
        let m = Media::new(64 << 30, 0xFF);
        let mut b = [0u8; 16];
        m.read((64 << 30) - 16, &mut b).unwrap();
        assert_eq!(b, [0xFF; 16]);
        assert_eq!(m.resident_bytes(), 0);
    }

    #[test]
    fn writes_across_chunks_read_back() {
        let mut m = Media::new(4 * CHUNK as u64, 0);
        let data: Vec<u8> = (0..3 * CHUNK).map(|i| (i % 251) as u8).collect();
        m.write(CHUNK as u64 / 2, &data).unwrap();
        let mut back = vec![0u8; data.len()];
        m.read(CHUNK as u64 / 2, &mut back).unwrap();
        assert_eq!(back, data);
        assert_eq!(m.resident_bytes(), 4 * CHUNK as u64);
    }

    #[test]
    fn filling_whole_chunks_with_the_fill_byte_frees_them() {
        let mut m = Media::new(3 * CHUNK as u64, 0);
        m.write(0, &vec![7u8; 3 * CHUNK]).unwrap();
        m.fill(100, 2 * CHUNK as u64 - 100, 0).unwrap();
        assert_eq!(m.resident_bytes(), 2 * CHUNK as u64, "chunk 1 freed, chunk 0 kept (partly covered)");
        let mut b = [9u8; 4];
        m.read(98, &mut b).unwrap();
        assert_eq!(b, [7, 7, 0, 0]);
    }

    #[test]
    fn accesses_outside_the_media_are_errors() {
        let mut m = Media::new(1000, 0);
        assert!(m.write(999, &[1, 2]).is_err());
        assert!(m.read(u64::MAX, &mut [0u8; 1]).is_err());
        assert!(m.fill(1000, 1, 0).is_err());
        assert!(m.write(998, &[1, 2]).is_ok());
    }
}
