//! Reading the small text files nvtest is given (suites, simulated-drive profiles, QEMU
//! topologies, expected findings), bounded in size: a path such as /dev/zero or a huge
//! file is an error naming it, not a process that reads until memory runs out.

use std::io::{self, Read};
use std::path::Path;

pub mod strict;

/// The most a suite, profile, topology or expected-findings file may hold.
pub const MAX_TEXT_FILE_BYTES: u64 = 4 << 20;

/// `message` on one line, as every error about an input file is shown: line breaks, tabs
/// and other control characters (a value quoted from the file may hold them) escaped.
pub fn one_line(message: &str) -> String {
    if !message.chars().any(char::is_control) {
        return message.to_string();
    }
    message.chars().map(|c| if c.is_control() { c.escape_debug().collect() } else { c.to_string() }).collect()
}

/// Reads `path` as UTF-8 text of at most [`MAX_TEXT_FILE_BYTES`]. Pipes and process
/// substitutions work (nothing is asked of the file's type); a directory, a longer or
/// endless stream, or bytes that are not UTF-8 are errors.
pub fn read_text_file(path: &Path) -> io::Result<String> {
    let file = std::fs::File::open(path)?;
    if file.metadata()?.is_dir() {
        return Err(io::Error::new(io::ErrorKind::IsADirectory, "it is a directory"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_TEXT_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_TEXT_FILE_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("it holds more than {} MiB (these files are small YAML texts)", MAX_TEXT_FILE_BYTES >> 20),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("it is not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

/// A size in bytes written as a whole number with an optional binary unit: `4096`,
/// `512 B`, `4 KiB`, `128MiB`, `1 GiB`, `2 TiB`. `None` when it is not one or does not fit
/// a u64. (QEMU topologies' namespace sizes, drive claims' block sizes.)
pub fn parse_size(text: &str) -> Option<u64> {
    let s = text.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(digits);
    let shift = match unit.trim() {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        "TiB" => 40,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_shown_on_one_line() {
        assert_eq!(one_line("uuid `6e76\n0001\t` is not a UUID"), "uuid `6e76\\n0001\\t` is not a UUID");
        assert_eq!(one_line("plain \"quoted\" text"), "plain \"quoted\" text");
    }

    #[test]
    fn an_endless_file_is_an_error_not_a_memory_exhaustion() {
        let e = read_text_file(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        assert!(e.to_string().contains("more than 4 MiB"), "{e}");
    }

    #[test]
    fn an_empty_file_a_directory_and_binary_data() {
        assert_eq!(read_text_file(Path::new("/dev/null")).unwrap(), "");
        assert_eq!(read_text_file(Path::new("/")).unwrap_err().kind(), io::ErrorKind::IsADirectory);
        let dir = tempfile::tempdir().unwrap();
        let binary = dir.path().join("binary");
        std::fs::write(&binary, b"suite: x\n\xff\xfe").unwrap();
        let e = read_text_file(&binary).unwrap_err();
        assert!(e.to_string().contains("not UTF-8 text (byte 9)"), "{e}");
    }
}
