//! Bad device answers never panic: a device that corrupts what it returns (bytes of
//! Identify data, log pages and reads flipped; statuses, DW0 and CIDs replaced; commands
//! that time out or fail in the driver) runs every case of the shipped suites. Opening a
//! session either succeeds or says why; every case ends with a verdict (a pass, failure,
//! error or skip); nothing panics.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use nvme::device::{Access, Data, Device, DeviceError, Registers};
use nvme::spec::{Command, Completion};
use nvme_sim::Profile;
use nvtest::exec::Session;
use nvtest::suite::{load_file, LoadedSuite};
use proptest::prelude::*;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// The corruption schedule: proptest's seeded generator.
struct Schedule(TestRng);

impl Schedule {
    fn new(seed: u64) -> Schedule {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        Schedule(TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// A simulated drive behind a layer that garbles its answers, `percent` % of the time.
struct Garbling {
    inner: Box<dyn Device>,
    rng: Schedule,
    percent: u64,
}

impl Garbling {
    fn garble(
        &mut self,
        result: Result<Completion, DeviceError>,
        data: &mut Data<'_>,
    ) -> Result<Completion, DeviceError> {
        if !self.rng.chance(self.percent) {
            return result;
        }
        let mut completion = result?;
        match self.rng.next() % 8 {
            0..=2 => {
                if let Data::FromDevice(bytes) = data {
                    for _ in 0..1 + self.rng.next() % 16 {
                        if !bytes.is_empty() {
                            let at = (self.rng.next() % bytes.len() as u64) as usize;
                            bytes[at] = self.rng.next() as u8;
                        }
                    }
                }
            }
            3 => completion.status = (self.rng.next() as u16) | (completion.status & 1),
            4 => completion.dw0 = self.rng.next() as u32,
            5 => completion.cid = self.rng.next() as u16,
            6 => return Err(DeviceError::Timeout { what: "a garbled command".into(), after_ms: 1 }),
            _ => return Err(DeviceError::Driver("the garbling layer dropped the completion".into())),
        }
        Ok(completion)
    }
}

impl Device for Garbling {
    fn describe(&self) -> String {
        format!("garbled {}", self.inner.describe())
    }

    fn access(&self) -> Access {
        self.inner.access()
    }

    fn admin(&mut self, cmd: Command, mut data: Data<'_>) -> Result<Completion, DeviceError> {
        let result = self.inner.admin(cmd, reborrow(&mut data));
        self.garble(result, &mut data)
    }

    fn io(
        &mut self,
        qid: u16,
        cmd: Command,
        mut data: Data<'_>,
        metadata: Data<'_>,
    ) -> Result<Completion, DeviceError> {
        let result = self.inner.io(qid, cmd, reborrow(&mut data), metadata);
        self.garble(result, &mut data)
    }

    fn io_queues(&self) -> Vec<u16> {
        self.inner.io_queues()
    }

    fn arm_async_events(&mut self, count: u16) -> Result<(), DeviceError> {
        self.inner.arm_async_events(count)
    }

    fn take_async_events(&mut self) -> Result<Vec<Completion>, DeviceError> {
        let mut events = self.inner.take_async_events()?;
        if self.rng.chance(self.percent) {
            for event in &mut events {
                event.dw0 = self.rng.next() as u32;
            }
        }
        Ok(events)
    }

    fn namespaces_changed(&mut self) -> Result<(), DeviceError> {
        self.inner.namespaces_changed()
    }

    fn command_timeout_ms(&self) -> u64 {
        self.inner.command_timeout_ms()
    }

    fn recover(&mut self) -> Result<(), DeviceError> {
        self.inner.recover()
    }

    fn controller_reset(&mut self) -> Result<(), DeviceError> {
        self.inner.controller_reset()
    }

    fn registers(&mut self) -> Option<&mut dyn Registers> {
        self.inner.registers()
    }
}

fn reborrow<'a>(data: &'a mut Data<'_>) -> Data<'a> {
    match data {
        Data::None => Data::None,
        Data::ToDevice(b) => Data::ToDevice(b),
        Data::FromDevice(b) => Data::FromDevice(b),
    }
}

fn suite(name: &str) -> LoadedSuite {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../suites").join(format!("{name}.yaml"));
    load_file(&path, Some(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn run_garbled(profile: &str, seed: u64, percent: u64) -> Result<(), TestCaseError> {
    let suites = [suite("namespaces"), suite("trim")];
    let inner = nvtest::targets::open_sim(Profile::builtin(profile).unwrap()).unwrap();
    let device = Box::new(Garbling { inner, rng: Schedule::new(seed), percent });
    let opened = catch_unwind(AssertUnwindSafe(|| Session::with_device(format!("garbled:{profile}"), device)))
        .map_err(|_| TestCaseError::fail(format!("opening a session panicked (seed {seed:#x}, {percent} %)")))?;
    let mut session = match opened {
        Ok(session) => session,
        Err(why) => {
            // Identify came back unusable: the session says why, on one line, instead of running.
            prop_assert!(!why.is_empty() && !why.contains('\n'), "unclear refusal: {why:?}");
            return Ok(());
        }
    };
    for case in suites.iter().flat_map(|s| &s.cases) {
        catch_unwind(AssertUnwindSafe(|| session.run_case(case, nvtest::exec::fresh_run_seed()))).map_err(|_| {
            TestCaseError::fail(format!("{} panicked on garbled answers (seed {seed:#x}, {percent} %)", case.name))
        })?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_case_survives_a_drive_that_garbles_its_answers(
        seed in any::<u64>(),
        percent in prop_oneof![Just(1u64), Just(5), Just(20), Just(100)],
        which in 0..2usize,
    ) {
        run_garbled(["enterprise-1.4", "enterprise-1.2a"][which], seed, percent)?;
    }
}
