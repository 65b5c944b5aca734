//! nvtest's test firmware images: what the `firmware` suite downloads to a drive when
//! the user gives no vendor image (`--firmware FILE`), and what the simulated drive
//! accepts. A 32-byte header, then the body:
//!
//! | bytes | field |
//! | --- | --- |
//! | 0–7 | magic `NVTFWIMG` |
//! | 8–15 | the firmware revision it installs (FR: printable ASCII, space padded) |
//! | 16–19 | body length in bytes (little-endian) |
//! | 20–23 | CRC-32 (IEEE) of the body (little-endian) |
//! | 24–31 | zero |
//!
//! A real drive refuses such an image (Invalid Firmware Image), which is what the
//! suite's error-path cases need; its activation cases need a real image.

/// The header's magic.
pub const MAGIC: &[u8; 8] = b"NVTFWIMG";
/// Header bytes.
pub const HEADER: usize = 32;

const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);

/// A test image installing `revision` (up to 8 printable ASCII characters), with a body
/// of `body_len` bytes (a pattern derived from the revision), padded to whole dwords.
pub fn build(revision: &str, body_len: usize) -> Vec<u8> {
    let body_len = body_len.div_ceil(4) * 4;
    let mut fr = [b' '; 8];
    for (d, s) in fr.iter_mut().zip(revision.bytes()) {
        *d = s;
    }
    let body: Vec<u8> = (0..body_len).map(|i| fr[i % 8].wrapping_add((i / 8) as u8)).collect();
    let mut image = Vec::with_capacity(HEADER + body_len);
    image.extend_from_slice(MAGIC);
    image.extend_from_slice(&fr);
    image.extend_from_slice(&(body_len as u32).to_le_bytes());
    image.extend_from_slice(&CRC32.checksum(&body).to_le_bytes());
    image.extend_from_slice(&[0u8; 8]);
    image.extend_from_slice(&body);
    image
}

/// Why bytes are not a valid test image.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("{0} bytes: shorter than the 32-byte header")]
    Short(usize),
    #[error("no NVTFWIMG magic")]
    Magic,
    #[error("the header says {said} body bytes, {got} follow it")]
    Length { said: usize, got: usize },
    #[error("the body's CRC-32 is {got:08x}, the header says {said:08x}")]
    Crc { said: u32, got: u32 },
    #[error("the revision is not printable ASCII")]
    Revision,
}

/// The revision a valid test image installs.
pub fn validate(image: &[u8]) -> Result<[u8; 8], ImageError> {
    if image.len() < HEADER {
        return Err(ImageError::Short(image.len()));
    }
    if &image[..8] != MAGIC {
        return Err(ImageError::Magic);
    }
    let mut fr = [0u8; 8];
    fr.copy_from_slice(&image[8..16]);
    let word = |at: usize| u32::from_le_bytes([image[at], image[at + 1], image[at + 2], image[at + 3]]);
    let said = word(16) as usize;
    let body = &image[HEADER..];
    if body.len() != said {
        return Err(ImageError::Length { said, got: body.len() });
    }
    let (said_crc, got_crc) = (word(20), CRC32.checksum(body));
    if said_crc != got_crc {
        return Err(ImageError::Crc { said: said_crc, got: got_crc });
    }
    if !fr.iter().all(|b| (0x20..=0x7E).contains(b)) {
        return Err(ImageError::Revision);
    }
    Ok(fr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_image_validates_and_a_changed_one_does_not() {
        let image = build("NVT14A02", 8000);
        assert_eq!(image.len(), HEADER + 8000);
        assert_eq!(&validate(&image).unwrap(), b"NVT14A02");
        let mut bad = image.clone();
        bad[100] ^= 1;
        assert!(matches!(validate(&bad), Err(ImageError::Crc { .. })));
        assert!(matches!(validate(&image[..4096]), Err(ImageError::Length { .. })));
        assert_eq!(validate(&[0u8; 40]), Err(ImageError::Magic));
    }
}
