//! The rig file (`--rig FILE`): how a hardware runner switches the power of a drive of
//! the Linux driver, for the power-fail cases. Either the lab's commands:
//!
//! ```yaml
//! power_off: "ipmitool -I lanplus -H pdu-3 -U lab chassis power off"   # sh -c, must cut the power
//! power_on: "ipmitool -I lanplus -H pdu-3 -U lab chassis power on"
//! settle: 2 s              # after power_on, before the PCI bus is rescanned (default 0 s)
//! come_back_within: 60 s   # the drive live again, and silent after power_off (default 60 s)
//! ```
//!
//! or, with no power switch, the weaker fallback (no power is lost; verdicts say so):
//!
//! ```yaml
//! pci_remove_rescan: true
//! ```
//!
//! The commands see `NVTEST_CONTROLLER`, `NVTEST_PCI_ADDRESS` and `NVTEST_SERIAL`. What a
//! power cycle does with them: [`nvme::linux::rig`].

use std::fmt;
use std::path::Path;
use std::time::Duration;

use nvme::input::strict::Strict;
use nvme::linux::rig::{Rig, Switch};
use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

use crate::claims::Quantity;

/// How long the drive may take by default to come back (and to go silent).
const DEFAULT_COME_BACK: Duration = Duration::from_secs(60);

/// A rig file that cannot be used: `FILE:LINE:COL: why`, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RigError(pub String);

impl fmt::Display for RigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RigFile {
    power_off: Option<Spanned<String>>,
    power_on: Option<Spanned<String>>,
    pci_remove_rescan: Option<Spanned<bool>>,
    settle: Option<Spanned<Quantity>>,
    come_back_within: Option<Spanned<Quantity>>,
}

/// Reads and checks the rig file at `path`.
pub fn load_rig(path: &Path) -> Result<Rig, RigError> {
    let origin = path.display().to_string();
    let text = nvme::input::read_text_file(path)
        .map_err(|e| RigError(format!("{origin}: cannot read the rig: {}", nvme::input::one_line(&e.to_string()))))?;
    parse_rig(&text, &origin)
}

/// Parses rig text; `origin` names it in errors.
pub fn parse_rig(text: &str, origin: &str) -> Result<Rig, RigError> {
    let at = |l: &Location, message: &str| {
        RigError(format!("{origin}:{}:{}: {}", l.line().max(1), l.column().max(1), nvme::input::one_line(message)))
    };
    let parsed: Result<Strict<Spanned<RigFile>>, _> =
        serde_saphyr::from_str_with_options(text, crate::suite::yaml_options());
    let Strict(file) = parsed.map_err(|e| {
        let (line, column, message) = crate::yaml_message::located(&e);
        let message = match message.as_str() {
            "unexpected end of file" | "unexpected end of input" => {
                "the file is empty or ends early; a rig needs `power_off` and `power_on`, or `pci_remove_rescan: true`"
                    .to_string()
            }
            _ => message,
        };
        RigError(format!("{origin}:{line}:{column}: {}", nvme::input::one_line(&message)))
    })?;
    let whole = &file.referenced;
    let file = file.value;
    let duration = |key: &str, q: &Option<Spanned<Quantity>>, default: Duration| match q {
        None => Ok(default),
        Some(q) => crate::claims::parse_duration(&q.value.0).map_err(|m| at(&q.referenced, &format!("{key} {m}"))),
    };
    let settle = duration("settle", &file.settle, Duration::ZERO)?;
    let come_back_within = duration("come_back_within", &file.come_back_within, DEFAULT_COME_BACK)?;
    if come_back_within.is_zero() {
        let l = file.come_back_within.as_ref().map_or(whole, |q| &q.referenced);
        return Err(at(l, "come_back_within 0 s leaves the drive no time to come back; give e.g. 60 s"));
    }
    let command = |key: &str, c: &Spanned<String>| {
        if c.value.trim().is_empty() {
            Err(at(&c.referenced, &format!("{key} is empty; give the command that does it (run with sh -c)")))
        } else {
            Ok(c.value.clone())
        }
    };
    let switch = match (&file.power_off, &file.power_on, &file.pci_remove_rescan) {
        (Some(off), Some(on), None) => {
            Switch::Commands { power_off: command("power_off", off)?, power_on: command("power_on", on)? }
        }
        (None, None, Some(r)) if r.value => Switch::PciRemoveRescan,
        (None, None, Some(r)) => {
            return Err(at(
                &r.referenced,
                "pci_remove_rescan: false leaves no way to switch the power; give power_off and power_on instead",
            ))
        }
        (Some(_), Some(_), Some(r)) => {
            return Err(at(
                &r.referenced,
                "pci_remove_rescan is the fallback for a rig without power commands; give one or the other",
            ))
        }
        (Some(off), None, _) => return Err(at(&off.referenced, "power_off without power_on: give both")),
        (None, Some(on), _) => return Err(at(&on.referenced, "power_on without power_off: give both")),
        (None, None, None) => {
            return Err(at(whole, "a rig needs `power_off` and `power_on` commands, or `pci_remove_rescan: true`"))
        }
    };
    Ok(Rig { switch, settle, come_back_within })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_with_times_are_read() {
        let rig = parse_rig("power_off: pdu off 3\npower_on: pdu on 3\nsettle: 2 s\ncome_back_within: 90s\n", "r.yaml")
            .unwrap();
        assert_eq!(
            rig,
            Rig {
                switch: Switch::Commands { power_off: "pdu off 3".into(), power_on: "pdu on 3".into() },
                settle: Duration::from_secs(2),
                come_back_within: Duration::from_secs(90),
            }
        );
        assert_eq!(rig.method(), nvme::transport::PowerMethod::Cut);
    }

    #[test]
    fn the_fallback_is_labelled_remove_rescan() {
        let rig = parse_rig("pci_remove_rescan: true\n", "r.yaml").unwrap();
        assert_eq!(rig.switch, Switch::PciRemoveRescan);
        assert_eq!(rig.method(), nvme::transport::PowerMethod::RemoveRescan);
        assert_eq!(rig.come_back_within, DEFAULT_COME_BACK);
    }

    #[test]
    fn a_bad_rig_is_one_line_with_file_line_and_column() {
        for (text, says) in [
            ("power_off: x\n", "r.yaml:1:12: power_off without power_on"),
            ("power_on: x\n", "r.yaml:1:11: power_on without power_off"),
            ("power_off: x\npower_on: y\npci_remove_rescan: true\n", "r.yaml:3:20: pci_remove_rescan is the fallback"),
            ("pci_remove_rescan: false\n", "r.yaml:1:20: pci_remove_rescan: false"),
            ("power_off: ' '\npower_on: y\n", "r.yaml:1:12: power_off is empty"),
            ("power_off: x\npower_on: y\nsettle: soon\n", "r.yaml:3:9: settle"),
            ("power_off: x\npower_on: y\ncome_back_within: 0\n", "r.yaml:3:19: come_back_within 0 s"),
            ("power_off: x\npower_on: y\npower_cycle: z\n", "r.yaml:3:1:"),
            ("", "r.yaml:"),
            ("- a\n", "r.yaml:1:1:"),
        ] {
            let e = parse_rig(text, "r.yaml").unwrap_err().0;
            assert!(e.starts_with(says), "{text:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
