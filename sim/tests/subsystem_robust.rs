//! No input panics the subsystem: random admin and NVM commands (random opcodes, NSIDs,
//! command dwords and data), on the clean profiles and with every quirk switched on,
//! each complete with some status.

use nvme::spec::{Command, Status};
use nvme_sim::profile::{InitialNamespace, Profile, Quirk};
use nvme_sim::subsystem::testing::TestHost;
use nvme_sim::subsystem::Subsystem;

/// xorshift64*: a small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value that is often small or at an edge, sometimes anything.
    fn dword(&mut self) -> u32 {
        match self.next() % 6 {
            0 => 0,
            1 => u32::MAX,
            2 => (self.next() % 16) as u32,
            3 => (self.next() % 0x1_0000) as u32,
            _ => self.next() as u32,
        }
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[(self.next() % items.len() as u64) as usize]
    }
}

fn small(profile: &str, quirks: &[Quirk]) -> Subsystem {
    let mut p = Profile::builtin(profile).unwrap();
    p.capacity_bytes = 32 << 20;
    p.namespaces = vec![
        InitialNamespace { lbads: 512, ms: 0, extended: false, blocks: 2048, attached: true },
        InitialNamespace { lbads: 4096, ms: 8, extended: false, blocks: 256, attached: true },
        InitialNamespace { lbads: 512, ms: 8, extended: false, blocks: 64, attached: false },
    ];
    for q in quirks {
        p = p.with_quirk(*q);
    }
    Subsystem::new(p).unwrap()
}

fn hammer(sub: &mut Subsystem, seed: u64, commands: usize) {
    let mut rng = Rng(seed);
    let mut host = TestHost::new(1);
    let admin_ops = [0x02u8, 0x06, 0x09, 0x0A, 0x0D, 0x15, 0x80, 0x10, 0x84, 0xFF];
    let io_ops = [0x00u8, 0x01, 0x02, 0x04, 0x05, 0x08, 0x09, 0x0C, 0x7F];
    let nsids = [0u32, 1, 2, 3, 4, 31, 32, 33, 0xFFFF_FFFE, 0xFFFF_FFFF];
    for i in 0..commands {
        let junk: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
        host.put(&junk);
        let mut cmd = Command {
            nsid: rng.pick(&nsids),
            cdw10: rng.dword(),
            cdw11: rng.dword(),
            cdw12: rng.dword(),
            cdw13: rng.dword(),
            ..Default::default()
        };
        let done = if i % 2 == 0 {
            cmd.opcode = rng.pick(&admin_ops);
            host.admin(sub, &cmd)
        } else {
            cmd.opcode = rng.pick(&io_ops);
            host.io(sub, &cmd)
        };
        // Every error carries DNR; a success carries nothing else.
        if !done.status.is_success() {
            assert!(done.status.dnr, "{:02X}h: {}", cmd.opcode, done.status);
            assert!(done.status.name().is_some(), "a status the spec names: {}", done.status);
        } else {
            assert_eq!(done.status, Status::SUCCESS);
        }
    }
}

#[test]
fn random_commands_never_panic_a_clean_drive() {
    for (profile, seed) in [("enterprise-1.4", 1), ("enterprise-1.2a", 2)] {
        let mut sub = small(profile, &[]);
        hammer(&mut sub, seed, 4000);
    }
}

#[test]
fn random_commands_never_panic_a_drive_with_every_quirk() {
    let mut sub = small("enterprise-1.4", Quirk::ALL);
    hammer(&mut sub, 3, 4000);
}
