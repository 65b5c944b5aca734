//! How a namespace's logical blocks travel in a command (NVMe 1.4 §8.2, Metadata Region:
//! Data Protection and the "Metadata – Contiguous with LBA Data" / "– Transferred as
//! Separate Buffer" figures): data alone (MS 0); each block's metadata right after its
//! data in the one data buffer (an extended LBA, FLBAS bit 4); or all the blocks'
//! metadata in a buffer of its own at MPTR.
//!
//! The metadata nvtest writes is a pattern keyed by the block's tag (NSID, LBA, write
//! generation, seed), so the metadata read back is judged as exactly as the data.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The transfer layout of one namespace's format in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// LBA data size in bytes.
    pub data: u64,
    /// MS: metadata bytes per block.
    pub metadata: u64,
    /// FLBAS bit 4: metadata contiguous with each block's data.
    pub extended: bool,
}

impl Layout {
    /// Data only, `data` bytes a block.
    pub fn plain(data: u64) -> Layout {
        Layout { data, metadata: 0, extended: false }
    }

    /// Bytes of the data buffer for `n` blocks.
    pub fn buffer_bytes(&self, n: u64) -> usize {
        (n * self.per_block_in_buffer()) as usize
    }

    /// Bytes of the separate metadata buffer for `n` blocks (0: none is sent).
    pub fn metadata_buffer_bytes(&self, n: u64) -> usize {
        if self.extended {
            0
        } else {
            (n * self.metadata) as usize
        }
    }

    /// Bytes one block takes in the data buffer: what MDTS limits.
    pub fn per_block_in_buffer(&self) -> u64 {
        if self.extended {
            self.data + self.metadata
        } else {
            self.data
        }
    }

    /// The data buffer and the metadata buffer of a command moving `data` (`n` whole
    /// blocks) with `metadata` (`n` × MS bytes).
    pub fn pack(&self, data: &[u8], metadata: &[u8]) -> (Vec<u8>, Vec<u8>) {
        if !self.extended || self.metadata == 0 {
            return (data.to_vec(), metadata.to_vec());
        }
        let (d, m) = (self.data as usize, self.metadata as usize);
        let mut buf = Vec::with_capacity(data.len() + metadata.len());
        for (block, md) in data.chunks_exact(d).zip(metadata.chunks_exact(m)) {
            buf.extend_from_slice(block);
            buf.extend_from_slice(md);
        }
        (buf, Vec::new())
    }

    /// The blocks' data and metadata, each contiguous, out of a command's buffers.
    pub fn unpack(&self, buffer: &[u8], metadata_buffer: &[u8]) -> (Vec<u8>, Vec<u8>) {
        if !self.extended || self.metadata == 0 {
            return (buffer.to_vec(), metadata_buffer.to_vec());
        }
        let (d, m) = (self.data as usize, self.metadata as usize);
        let blocks = buffer.len() / (d + m);
        let (mut data, mut metadata) = (Vec::with_capacity(blocks * d), Vec::with_capacity(blocks * m));
        for block in buffer.chunks_exact(d + m) {
            data.extend_from_slice(&block[..d]);
            metadata.extend_from_slice(&block[d..]);
        }
        (data, metadata)
    }

    /// The metadata nvtest writes with `n` blocks from `lba` of one write generation.
    pub fn metadata_for(&self, nsid: u32, lba: u64, n: u64, generation: u64, seed: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity((n * self.metadata) as usize);
        for k in 0..n {
            out.extend(metadata_pattern(nsid, lba + k, generation, seed, self.metadata as usize));
        }
        out
    }
}

/// MS bytes of metadata for one written block, from its tag.
pub fn metadata_pattern(nsid: u32, lba: u64, generation: u64, seed: u64, ms: usize) -> Vec<u8> {
    let mut key = [0u8; 28];
    key[..4].copy_from_slice(&nsid.to_le_bytes());
    key[4..12].copy_from_slice(&lba.to_le_bytes());
    key[12..20].copy_from_slice(&generation.to_le_bytes());
    let mut out = Vec::with_capacity(ms + 8);
    let mut word = 0u64;
    while out.len() < ms {
        key[20..28].copy_from_slice(&word.to_le_bytes());
        out.extend_from_slice(&xxh3_64_with_seed(&key, seed).to_le_bytes());
        word += 1;
    }
    out.truncate(ms);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extended_lba_carries_each_blocks_metadata_after_its_data() {
        let layout = Layout { data: 4, metadata: 2, extended: true };
        let (buf, md) = layout.pack(b"aaaabbbb", b"1122");
        assert_eq!(buf, b"aaaa11bbbb22");
        assert!(md.is_empty());
        assert_eq!((layout.buffer_bytes(2), layout.metadata_buffer_bytes(2), layout.per_block_in_buffer()), (12, 0, 6));
        assert_eq!(layout.unpack(&buf, &[]), (b"aaaabbbb".to_vec(), b"1122".to_vec()));
    }

    #[test]
    fn separate_metadata_travels_in_its_own_buffer() {
        let layout = Layout { data: 4, metadata: 2, extended: false };
        assert_eq!(layout.pack(b"aaaabbbb", b"1122"), (b"aaaabbbb".to_vec(), b"1122".to_vec()));
        assert_eq!((layout.buffer_bytes(2), layout.metadata_buffer_bytes(2), layout.per_block_in_buffer()), (8, 4, 4));
        let plain = Layout::plain(512);
        assert_eq!((plain.buffer_bytes(3), plain.metadata_buffer_bytes(3)), (1536, 0));
    }

    #[test]
    fn the_metadata_pattern_is_keyed_by_the_blocks_tag() {
        let a = metadata_pattern(1, 7, 3, 99, 16);
        assert_eq!(a.len(), 16);
        assert_eq!(a, metadata_pattern(1, 7, 3, 99, 16));
        for other in
            [metadata_pattern(2, 7, 3, 99, 16), metadata_pattern(1, 8, 3, 99, 16), metadata_pattern(1, 7, 4, 99, 16)]
        {
            assert_ne!(a, other);
        }
        assert_eq!(metadata_pattern(1, 7, 3, 99, 5), a[..5]);
        let layout = Layout { data: 512, metadata: 8, extended: false };
        assert_eq!(layout.metadata_for(1, 7, 2, 3, 99)[8..], metadata_pattern(1, 8, 3, 99, 8)[..]);
    }
}
