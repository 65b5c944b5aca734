//! The simulated drive as a target: a profile (`sim:NAME`, `sim:PATH.yaml`) opened
//! behind nvtest's own host driver, and the claims its profile carries.

use nvme::device::Device;
use nvme::driver::{Controller, Options};
use nvme_sim::Profile;

use super::spec::TargetSpec;

/// The claims a simulated drive's profile carries (`claims:`), read from the profile's own
/// text so a failure cites the profile file's line; `None` for other targets and for
/// profiles without claims.
pub fn profile_claims(spec: &TargetSpec) -> Result<Option<crate::claims::Claims>, String> {
    let (origin, text) = match spec {
        TargetSpec::SimProfile(name) => match Profile::builtin_source(name) {
            Some((origin, text)) => (origin, text.to_string()),
            None => return Ok(None),
        },
        TargetSpec::SimFile(path) => {
            let text = nvme::input::read_text_file(path)
                .map_err(|e| format!("{}: cannot read the profile: {e}", path.display()))?;
            (path.display().to_string(), text)
        }
        _ => return Ok(None),
    };
    crate::claims::claims_of_profile(&text, &origin).map_err(|e| e.to_string())
}

/// The simulated drive of `profile`, behind nvtest's own host driver: its first port,
/// with the drive's other ports (`controller.ports`) brought up beside it
/// ([`Device::port`]).
pub fn open_sim(profile: Profile) -> Result<Box<dyn Device>, String> {
    let name = profile.name.clone();
    let mut ports = nvme_sim::open_ports(profile).map_err(|e| format!("sim:{name}: {e}"))?.into_iter();
    let bring_up = |number: usize, transport| {
        Controller::new(Box::new(transport), Options::default())
            .map_err(|e| format!("sim:{name}: port {number}: bring-up: {e}"))
    };
    let first = ports.next().ok_or_else(|| format!("sim:{name}: the drive has no port"))?;
    let mut controller = bring_up(1, first)?;
    for (k, transport) in ports.enumerate() {
        controller.add_port(bring_up(k + 2, transport)?);
    }
    Ok(Box::new(controller))
}
