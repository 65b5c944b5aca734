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
//!
//! A media may be encrypted ([`Crypt`]): stored chunks then hold ciphertext, a write
//! encrypts the data units it touches (decrypting first those it covers only in part)
//! and a read decrypts straight into the reader's buffer (into one of its own for a
//! unit it covers only in part). A chunk never written still reads as
//! the fill byte without a cipher in the way (the drive's map has no block there).

use std::convert::Infallible;
use std::sync::Mutex;

use super::crypt::{Crypt, Key};

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
    crypt: Option<Crypt>,
    /// What a chunk never stored reads as instead of the fill byte, after
    /// [`Media::overwrite`]: a 4-byte pattern repeated from media offset 0.
    background: Option<[u8; 4]>,
}

impl Media {
    /// `size` bytes, all reading as `fill` until written.
    pub fn new(size: u64, fill: u8) -> Media {
        let count = size.div_ceil(CHUNK as u64) as usize;
        let mut chunks = Vec::new();
        chunks.resize_with(count, || None);
        Media { chunks, size, fill, crypt: None, background: None }
    }

    /// [`Media::new`], its data stored encrypted under `key` in units of `unit` bytes.
    pub fn encrypted(size: u64, fill: u8, key: Key, unit: usize) -> Media {
        let mut media = Media::new(size, fill);
        media.crypt = Some(Crypt::new(key, unit));
        media
    }

    /// The key the data is encrypted under, if it is.
    pub fn key(&self) -> Option<Key> {
        self.crypt.as_ref().map(Crypt::key)
    }

    /// Replaces the key (a cryptographic erase): every stored chunk stays, and from now
    /// on decrypts to noise. Chunks never written still read as the fill byte.
    pub fn rekey(&mut self, key: Key) {
        if let Some(unit) = self.crypt.as_ref().map(Crypt::unit) {
            self.crypt = Some(Crypt::new(key, unit));
        }
    }

    /// Every byte reads as `pattern` repeated (byte `i` of the media as `pattern[i % 4]`):
    /// the stored chunks are dropped and the pattern becomes what unstored chunks read as.
    pub fn overwrite(&mut self, pattern: [u8; 4]) {
        recycle(self.chunks.iter_mut().filter_map(Option::take));
        self.background = Some(pattern);
    }

    /// Takes `old`'s stored chunks where they fall inside this media, and its key (quirk
    /// `create-keeps-old-media`: the old bytes show through).
    pub fn inherit(&mut self, mut old: Media) {
        for (mine, theirs) in self.chunks.iter_mut().zip(old.chunks.iter_mut()) {
            if theirs.is_some() {
                *mine = theirs.take();
            }
        }
        if let (Some(mine), Some(theirs)) = (self.crypt.as_mut(), old.crypt.take()) {
            *mine = theirs;
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
        let mut plain = Vec::new();
        for Piece { index, within, n, .. } in pieces(offset, len) {
            let run = match (self.chunks.get(index).and_then(|c| c.as_deref()), &self.crypt) {
                (Some(chunk), None) => Run::Bytes(&chunk[within..within + n]),
                (Some(chunk), Some(crypt)) => {
                    let (lo, hi) = crypt.units_around(within, n, chunk.len());
                    plain.resize(hi - lo, 0);
                    crypt.decrypt_into(chunk_start(index) + lo as u64, &chunk[lo..hi], &mut plain);
                    Run::Bytes(&plain[within - lo..within - lo + n])
                }
                (None, _) => match self.background {
                    None => Run::Fill(self.fill, n),
                    Some(pattern) => {
                        plain.clear();
                        plain.resize(n, 0);
                        repeat(&mut plain, pattern, chunk_start(index) + within as u64);
                        Run::Bytes(&plain)
                    }
                },
            };
            if let Err(e) = visit(run) {
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    /// The bytes at `offset .. offset + len` as stored, ciphertext included, when the
    /// media is encrypted, the range is whole data units inside one chunk and that chunk
    /// was written: what [`Media::put_stored`] puts back without decrypting and
    /// encrypting again (a write's old content, kept against a power loss). `None`
    /// otherwise: read the plaintext then.
    pub fn stored(&self, offset: u64, len: u64) -> Option<Vec<u8>> {
        let crypt = self.crypt.as_ref()?;
        let unit = crypt.unit() as u64;
        let Piece { index, within, n, .. } = pieces(offset, len).next()?;
        if !offset.is_multiple_of(unit)
            || !len.is_multiple_of(unit)
            || n as u64 != len
            || self.check(offset, len).is_err()
        {
            return None;
        }
        self.chunks.get(index)?.as_deref().map(|chunk| chunk[within..within + n].to_vec())
    }

    /// Puts back bytes [`Media::stored`] gave for `offset`, as they were stored.
    pub fn put_stored(&mut self, offset: u64, bytes: &[u8]) -> Result<(), OutOfMedia> {
        self.check(offset, bytes.len() as u64)?;
        let mut at = 0;
        for Piece { index, within, n, .. } in pieces(offset, bytes.len() as u64) {
            let (fill, background, crypt) = (self.fill, self.background, &self.crypt);
            let chunk = self.chunks[index].get_or_insert_with(|| {
                // A chunk gone since (never, while the change is kept): the rest of it
                // reads as the fill byte again, stored as the media stores it.
                let mut chunk = new_chunk(fill, false);
                if let Some(pattern) = background {
                    repeat(&mut chunk, pattern, chunk_start(index));
                }
                if let Some(crypt) = crypt {
                    crypt.encrypt(chunk_start(index), &mut chunk);
                }
                chunk
            });
            chunk[within..within + n].copy_from_slice(&bytes[at..at + n]);
            at += n;
        }
        Ok(())
    }

    /// Copies `out.len()` bytes at `offset` into `out`. Encrypted data units the range
    /// covers whole are decrypted straight into `out` (a read's copy out of the media and
    /// its decryption in one pass); only a range starting or ending inside a unit goes
    /// through [`Media::read_runs`]'s buffer.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), OutOfMedia> {
        self.check(offset, out.len() as u64)?;
        let mut at = 0;
        for Piece { at: piece_at, index, within, n } in pieces(offset, out.len() as u64) {
            let dst = &mut out[at..at + n];
            at += n;
            match (self.chunks.get(index).and_then(|c| c.as_deref()), &self.crypt) {
                (Some(chunk), None) => dst.copy_from_slice(&chunk[within..within + n]),
                (Some(chunk), Some(crypt)) if crypt.units_around(within, n, chunk.len()) == (within, within + n) => {
                    crypt.decrypt_into(piece_at, &chunk[within..within + n], dst)
                }
                _ => self.read_piece(piece_at, dst)?,
            }
        }
        Ok(())
    }

    /// [`Media::read`] of one piece through [`Media::read_runs`].
    fn read_piece(&self, offset: u64, out: &mut [u8]) -> Result<(), OutOfMedia> {
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
            if index >= self.chunks.len() {
                return Err(OutOfMedia { offset, len, size: self.size });
            }
            if let Err(e) = self.write_piece(index, within, n, fill_in) {
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    /// Hands bytes `within .. within + n` of chunk `index` (which exists) to `fill_in`,
    /// encrypting the data units it touched afterwards when the media is encrypted.
    fn write_piece<E>(
        &mut self,
        index: usize,
        within: usize,
        n: usize,
        fill_in: &mut dyn FnMut(&mut [u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let fill = self.fill;
        let slot = &mut self.chunks[index];
        let fresh = slot.is_none();
        let whole = n == CHUNK;
        let chunk = slot.get_or_insert_with(|| new_chunk(fill, whole));
        if let (true, false, Some(pattern)) = (fresh, whole, self.background) {
            repeat(chunk, pattern, chunk_start(index));
        }
        let Some(crypt) = &self.crypt else {
            let filled = fill_in(&mut chunk[within..within + n]);
            if filled.is_err() && fresh && whole {
                // What the piece holds is unknown; never another media's old bytes.
                chunk.fill(fill);
            }
            return filled;
        };
        let at = chunk_start(index);
        let (lo, hi) = crypt.units_around(within, n, chunk.len());
        if fresh && !whole {
            // The rest of the chunk reads as the fill byte: store it as ciphertext.
            crypt.encrypt(at, chunk);
        }
        if lo < within || hi > within + n {
            // Units covered in part keep their other bytes.
            crypt.decrypt(at + lo as u64, &mut chunk[lo..hi]);
        }
        let filled = fill_in(&mut chunk[within..within + n]);
        if filled.is_err() && fresh && whole {
            *slot = None;
            return filled;
        }
        crypt.encrypt(at + lo as u64, &mut chunk[lo..hi]);
        filled
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
                if byte == fill && self.background.is_none() && (whole || slot.is_none()) {
                    if let Some(chunk) = slot.take() {
                        recycle(std::iter::once(chunk));
                    }
                } else {
                    let set: Result<(), Infallible> = self.write_piece(index, within, n, &mut |dst| {
                        dst.fill(byte);
                        Ok(())
                    });
                    if let Err(never) = set {
                        match never {}
                    }
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

/// Sets `out` to `pattern` repeated as it lies from media offset `at`.
fn repeat(out: &mut [u8], pattern: [u8; 4], at: u64) {
    for (i, b) in out.iter_mut().enumerate() {
        *b = pattern[((at + i as u64) % 4) as usize];
    }
}

/// The media offset chunk `index` starts at.
fn chunk_start(index: usize) -> u64 {
    index as u64 * CHUNK as u64
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
    fn encrypted_media_stores_ciphertext_and_reads_plaintext() {
        let key = Key::derive(1, 0);
        let mut m = Media::encrypted(4 * CHUNK as u64, 0, key, 4096);
        let data: Vec<u8> = (0..CHUNK + 8000).map(|i| (i % 253) as u8).collect();
        m.write(700, &data).unwrap();
        let mut back = vec![0u8; data.len()];
        m.read(700, &mut back).unwrap();
        assert_eq!(back, data);
        // Whole data units, decrypted straight into the reader's buffer, across a chunk.
        let mut units = vec![0u8; 2 * 4096];
        m.read(CHUNK as u64 - 4096, &mut units).unwrap();
        assert_eq!(units, data[CHUNK - 4096 - 700..CHUNK + 4096 - 700]);
        let mut head = [9u8; 700];
        m.read(0, &mut head).unwrap();
        assert_eq!(head, [0u8; 700], "bytes around a partial write still read as the fill byte");
        let stored = m.chunks[0].as_deref().unwrap();
        assert_ne!(&stored[700..1700], &data[..1000], "the chunk holds ciphertext");
        m.fill(0, 4096, 0x33).unwrap();
        let mut filled = [0u8; 4096];
        m.read(0, &mut filled).unwrap();
        assert_eq!(filled, [0x33; 4096]);
        m.rekey(Key::derive(1, 1));
        m.read(700, &mut back).unwrap();
        assert_ne!(back, data, "under a new key the old data is gone");
        let mut never = [1u8; 16];
        m.read(3 * CHUNK as u64, &mut never).unwrap();
        assert_eq!(never, [0u8; 16], "a chunk never written still reads as the fill byte");
    }

    #[test]
    fn an_overwritten_media_reads_the_pattern_until_written() {
        let mut m = Media::encrypted(2 * CHUNK as u64, 0, Key::derive(2, 0), 512);
        m.write(0, &[7u8; 1024]).unwrap();
        m.overwrite([1, 2, 3, 4]);
        assert_eq!(m.resident_bytes(), 0);
        let mut b = [0u8; 6];
        m.read(2, &mut b).unwrap();
        assert_eq!(b, [3, 4, 1, 2, 3, 4]);
        m.write(CHUNK as u64 + 4, &[9u8; 4]).unwrap();
        let mut c = [0u8; 12];
        m.read(CHUNK as u64, &mut c).unwrap();
        assert_eq!(c, [1, 2, 3, 4, 9, 9, 9, 9, 1, 2, 3, 4]);
        m.fill(0, CHUNK as u64, 0).unwrap();
        m.read(0, &mut b).unwrap();
        assert_eq!(b, [0; 6], "deallocated blocks read as the fill byte again");
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
