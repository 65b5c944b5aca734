//! What the drive can erase, as its profile's `erase:` section says: whether user data
//! is stored encrypted (AES-256-XTS, [`super::crypt`]), the Format NVM Attributes (FNA,
//! Identify Controller byte 524) and the Sanitize operations SANICAP reports (NVMe 1.3
//! and later), with how long each sanitize operation takes on the simulated clock.
//!
//! ```yaml
//! erase:
//!   encryption: true
//!   format: {all_namespaces: false, secure_erase_all_namespaces: false, crypto_erase: true}
//!   sanitize: {block_erase: true, crypto_erase: true, overwrite: true, no_deallocate_inhibited: false,
//!              block_erase_ms: 2000, crypto_erase_ms: 100, overwrite_pass_ms: 4000}
//! ```

use nvme::spec::identify::{Fna, Sanicap};
use serde::Deserialize;

/// The `erase:` section. Without it: no encryption, FNA 0, no Sanitize.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EraseModel {
    /// User data is stored AES-256-XTS encrypted, a key per namespace.
    #[serde(default)]
    pub encryption: bool,
    #[serde(default)]
    pub format: FormatAttributes,
    /// The Sanitize command (NVMe 1.3 and later); `None`: not supported (SANICAP 0).
    #[serde(default)]
    pub sanitize: Option<SanitizeModel>,
}

/// FNA: Format NVM Attributes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FormatAttributes {
    /// Bit 0: a format of any namespace formats all namespaces.
    #[serde(default)]
    pub all_namespaces: bool,
    /// Bit 1: a secure erase of any namespace erases all namespaces.
    #[serde(default)]
    pub secure_erase_all_namespaces: bool,
    /// Bit 2: Cryptographic Erase is supported as a Secure Erase Setting (needs `encryption`).
    #[serde(default)]
    pub crypto_erase: bool,
}

/// SANICAP and the operations' durations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SanitizeModel {
    /// CES: Crypto Erase (needs `encryption`).
    #[serde(default)]
    pub crypto_erase: bool,
    /// BES: Block Erase.
    #[serde(default)]
    pub block_erase: bool,
    /// OWS: Overwrite.
    #[serde(default)]
    pub overwrite: bool,
    /// NDI: No-Deallocate Inhibited (NDAS set is refused with Invalid Field in Command).
    #[serde(default)]
    pub no_deallocate_inhibited: bool,
    /// Simulated time a Block Erase takes, in milliseconds.
    #[serde(default)]
    pub block_erase_ms: u64,
    /// Simulated time a Crypto Erase takes.
    #[serde(default)]
    pub crypto_erase_ms: u64,
    /// Simulated time each Overwrite pass takes.
    #[serde(default)]
    pub overwrite_pass_ms: u64,
    /// A fault, not a quirk (a drive may fail a sanitize): the first this many operations
    /// fail when they end (SSTAT 011b), erasing nothing, and leave the controller in
    /// failure mode, unrestricted when the Sanitize set AUSE, else restricted.
    #[serde(default)]
    pub fail_next: u32,
}

impl EraseModel {
    /// FNA as the section gives it.
    pub fn fna(&self) -> Fna {
        Fna::new()
            .with_format_all_namespaces(self.format.all_namespaces)
            .with_secure_erase_all_namespaces(self.format.secure_erase_all_namespaces)
            .with_crypto_erase(self.format.crypto_erase)
    }

    /// SANICAP as the section gives it (NODMMAS 01b: a no-deallocate sanitize does not
    /// modify the media further after the operation).
    pub fn sanicap(&self) -> Sanicap {
        match &self.sanitize {
            None => Sanicap::new(),
            Some(s) => Sanicap::new()
                .with_ces(s.crypto_erase)
                .with_bes(s.block_erase)
                .with_ows(s.overwrite)
                .with_ndi(s.no_deallocate_inhibited)
                .with_nodmmas(1),
        }
    }

    /// What is inconsistent in the section, for the profile's error.
    pub fn problem(&self, sanitize_allowed: bool) -> Option<&'static str> {
        let crypto = self.format.crypto_erase || self.sanitize.is_some_and(|s| s.crypto_erase);
        if crypto && !self.encryption {
            return Some("a crypto erase (format or sanitize) needs `encryption: true`: there is no key to delete");
        }
        match &self.sanitize {
            Some(_) if !sanitize_allowed => {
                Some("Sanitize is NVMe 1.3 and later: this profile's version has no SANICAP")
            }
            Some(s) if !(s.crypto_erase || s.block_erase || s.overwrite) => {
                Some("sanitize needs at least one of crypto_erase, block_erase, overwrite")
            }
            _ => None,
        }
    }
}
