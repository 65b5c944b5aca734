//! Helpers shared by the QEMU lifecycle tests.

use std::path::Path;

/// Processes whose command line names `dir` (a QEMU of a run names its sockets and
/// images in the run's TMPDIR, even after their names are gone).
pub fn processes_naming(dir: &Path) -> Vec<u32> {
    let needle = dir.as_os_str().as_encoded_bytes();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            if cmdline.windows(needle.len()).any(|w| w == needle) {
                found.push(pid);
            }
        }
    }
    found
}
