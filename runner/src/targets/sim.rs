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

/// The simulated drive of `profile`, behind nvtest's own host driver.
pub fn open_sim(profile: Profile) -> Result<Box<dyn Device>, String> {
    let name = profile.name.clone();
    let transport = nvme_sim::open(profile).map_err(|e| format!("sim:{name}: {e}"))?;
    let controller =
        Controller::new(Box::new(transport), Options::default()).map_err(|e| format!("sim:{name}: bring-up: {e}"))?;
    Ok(Box::new(controller))
}
