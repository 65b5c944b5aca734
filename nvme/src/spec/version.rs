//! NVMe version numbers as reported in VS (offset 08h) and Identify Controller VER.

use std::fmt;

/// A specification version, "Version (VS)" register layout: MJR 31:16, MNR 15:8, TER 7:0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u16,
    pub minor: u8,
    pub tertiary: u8,
}

impl Version {
    pub const V1_0: Version = Version::new(1, 0, 0);
    pub const V1_1: Version = Version::new(1, 1, 0);
    pub const V1_2: Version = Version::new(1, 2, 0);
    pub const V1_2_1: Version = Version::new(1, 2, 1);
    pub const V1_3: Version = Version::new(1, 3, 0);
    pub const V1_4: Version = Version::new(1, 4, 0);

    pub const fn new(major: u16, minor: u8, tertiary: u8) -> Self {
        Version { major, minor, tertiary }
    }

    /// Decodes the VS register / VER field. A value of 0 (pre-1.2 controllers may
    /// leave VER zero) decodes as 0.0.0.
    pub const fn from_register(value: u32) -> Self {
        Version::new((value >> 16) as u16, (value >> 8) as u8, value as u8)
    }

    pub const fn to_register(self) -> u32 {
        (self.major as u32) << 16 | (self.minor as u32) << 8 | self.tertiary as u32
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)?;
        if self.tertiary != 0 {
            write!(f, ".{}", self.tertiary)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Version {
    type Err = String;

    /// Parses "1.4", "1.2.1" (as written in suites and profiles).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.split('.');
        let mut next = |name: &str| -> Result<Option<u32>, String> {
            match parts.next() {
                None => Ok(None),
                Some(p) => p
                    .parse::<u32>()
                    .map(Some)
                    .map_err(|_| format!("`{s}` is not a version like 1.4 or 1.2.1 ({name} `{p}`)")),
            }
        };
        let major = next("major")?.ok_or_else(|| format!("`{s}` is not a version"))?;
        let minor = next("minor")?.unwrap_or(0);
        let ter = next("tertiary")?.unwrap_or(0);
        if parts.next().is_some() || major > 0xffff || minor > 0xff || ter > 0xff {
            return Err(format!("`{s}` is not a version like 1.4 or 1.2.1"));
        }
        Ok(Version::new(major as u16, minor as u8, ter as u8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_round_trip_and_order() {
        let v = Version::from_register(0x0001_0400);
        assert_eq!(v, Version::V1_4);
        assert_eq!(v.to_register(), 0x0001_0400);
        assert!(Version::V1_2_1 < Version::V1_3);
        assert_eq!("1.2.1".parse::<Version>().unwrap(), Version::V1_2_1);
        assert_eq!(Version::V1_2_1.to_string(), "1.2.1");
        assert!("1.x".parse::<Version>().is_err());
    }
}
