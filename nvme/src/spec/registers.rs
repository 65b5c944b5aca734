//! Controller registers in BAR0: "Figure 78: Controller Registers" (NVMe 1.4 §3.1).
//!
//! Each register with fields is a bitfield struct named as the spec names it; offsets
//! are in [`offset`]. Doorbells follow at 1000h with a stride of `4 << CAP.DSTRD`.

use bitfield_struct::bitfield;

/// Register offsets in BAR0 ("Figure 78: Controller Registers").
pub mod offset {
    /// CAP: Controller Capabilities (64-bit).
    pub const CAP: u64 = 0x00;
    /// VS: Version.
    pub const VS: u64 = 0x08;
    /// INTMS: Interrupt Mask Set.
    pub const INTMS: u64 = 0x0C;
    /// INTMC: Interrupt Mask Clear.
    pub const INTMC: u64 = 0x10;
    /// CC: Controller Configuration.
    pub const CC: u64 = 0x14;
    /// CSTS: Controller Status.
    pub const CSTS: u64 = 0x1C;
    /// NSSR: NVM Subsystem Reset.
    pub const NSSR: u64 = 0x20;
    /// AQA: Admin Queue Attributes.
    pub const AQA: u64 = 0x24;
    /// ASQ: Admin Submission Queue Base Address (64-bit).
    pub const ASQ: u64 = 0x28;
    /// ACQ: Admin Completion Queue Base Address (64-bit).
    pub const ACQ: u64 = 0x30;
    /// CMBLOC: Controller Memory Buffer Location.
    pub const CMBLOC: u64 = 0x38;
    /// CMBSZ: Controller Memory Buffer Size.
    pub const CMBSZ: u64 = 0x3C;
    /// Start of the doorbell registers (SQ 0 Tail Doorbell).
    pub const DOORBELLS: u64 = 0x1000;
}

/// "NVM Subsystem Reset (NSSR)": the value that starts a reset ("NVMe" in ASCII).
pub const NSSR_RESET_VALUE: u32 = 0x4E56_4D65;

/// Offset of SQ `qid`'s Tail Doorbell (`completion == false`) or CQ `qid`'s Head
/// Doorbell (`completion == true`), §3.1.16 / §3.1.17.
pub const fn doorbell(qid: u16, completion: bool, dstrd: u8) -> u64 {
    offset::DOORBELLS + (2 * qid as u64 + completion as u64) * (4u64 << dstrd)
}

/// CAP: "Figure 79: Offset 0h: CAP – Controller Capabilities".
#[bitfield(u64)]
#[derive(PartialEq, Eq)]
pub struct Cap {
    /// MQES: Maximum Queue Entries Supported (0's based).
    pub mqes: u16,
    /// CQR: Contiguous Queues Required.
    pub cqr: bool,
    /// AMS: Arbitration Mechanism Supported (bit 0: WRR with urgent, bit 1: vendor).
    #[bits(2)]
    pub ams: u8,
    #[bits(5)]
    __: u8,
    /// TO: Timeout, in 500 ms units, worst case for CSTS.RDY to follow CC.EN.
    pub to: u8,
    /// DSTRD: Doorbell Stride (`4 << DSTRD` bytes).
    #[bits(4)]
    pub dstrd: u8,
    /// NSSRS: NVM Subsystem Reset Supported.
    pub nssrs: bool,
    /// CSS: Command Sets Supported (bit 0: NVM command set).
    pub css: u8,
    /// BPS: Boot Partition Support.
    pub bps: bool,
    #[bits(2)]
    __: u8,
    /// MPSMIN: Memory Page Size Minimum (`2 ^ (12 + MPSMIN)`).
    #[bits(4)]
    pub mpsmin: u8,
    /// MPSMAX: Memory Page Size Maximum.
    #[bits(4)]
    pub mpsmax: u8,
    /// PMRS: Persistent Memory Region Supported (1.4).
    pub pmrs: bool,
    /// CMBS: Controller Memory Buffer Supported (1.4).
    pub cmbs: bool,
    #[bits(6)]
    __: u8,
}

impl Cap {
    /// CAP.TO in milliseconds.
    pub fn timeout_ms(&self) -> u64 {
        self.to() as u64 * 500
    }
}

/// CC: "Figure 84: Offset 14h: CC – Controller Configuration".
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct Cc {
    /// EN: Enable.
    pub en: bool,
    #[bits(3)]
    __: u8,
    /// CSS: I/O Command Set Selected (000b: NVM command set).
    #[bits(3)]
    pub css: u8,
    /// MPS: Memory Page Size (`2 ^ (12 + MPS)`).
    #[bits(4)]
    pub mps: u8,
    /// AMS: Arbitration Mechanism Selected (000b round robin, 001b WRR with urgent).
    #[bits(3)]
    pub ams: u8,
    /// SHN: Shutdown Notification (01b normal, 10b abrupt).
    #[bits(2)]
    pub shn: u8,
    /// IOSQES: I/O Submission Queue Entry Size (log2; 6 for 64 bytes).
    #[bits(4)]
    pub iosqes: u8,
    /// IOCQES: I/O Completion Queue Entry Size (log2; 4 for 16 bytes).
    #[bits(4)]
    pub iocqes: u8,
    #[bits(8)]
    __: u8,
}

/// CSTS: "Figure 85: Offset 1Ch: CSTS – Controller Status".
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct Csts {
    /// RDY: Ready.
    pub rdy: bool,
    /// CFS: Controller Fatal Status.
    pub cfs: bool,
    /// SHST: Shutdown Status (00b normal, 01b occurring, 10b complete).
    #[bits(2)]
    pub shst: u8,
    /// NSSRO: NVM Subsystem Reset Occurred.
    pub nssro: bool,
    /// PP: Processing Paused.
    pub pp: bool,
    #[bits(26)]
    __: u32,
}

/// AQA: "Figure 87: Offset 24h: AQA – Admin Queue Attributes". Sizes are 0's based.
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct Aqa {
    /// ASQS: Admin Submission Queue Size.
    #[bits(12)]
    pub asqs: u16,
    #[bits(4)]
    __: u8,
    /// ACQS: Admin Completion Queue Size.
    #[bits(12)]
    pub acqs: u16,
    #[bits(4)]
    __: u8,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_fields_sit_at_figure_79_bits() {
        let cap = Cap::from_bits(0x0020_0020_1e01_07ff | 3 << 32);
        assert_eq!(cap.mqes(), 0x7ff);
        assert!(cap.cqr());
        assert_eq!(cap.to(), 0x1e);
        assert_eq!(cap.timeout_ms(), 15_000);
        assert_eq!(cap.dstrd(), 3);
        assert_eq!(cap.css(), 1);
        assert_eq!(cap.mpsmin(), 0);
        assert_eq!(cap.mpsmax(), 2);
        assert_eq!(doorbell(1, true, 0), 0x100C);
        assert_eq!(doorbell(2, false, 3), 0x1000 + 4 * 32);
    }

    #[test]
    fn cc_csts_aqa_fields() {
        let cc = Cc::new().with_en(true).with_iosqes(6).with_iocqes(4);
        assert_eq!(cc.into_bits(), 0x0046_0001);
        assert!(Csts::from_bits(0b1001).rdy());
        assert_eq!(Csts::from_bits(0b1001).shst(), 2);
        assert_eq!(Aqa::new().with_asqs(63).with_acqs(31).into_bits(), 0x001f_003f);
    }
}
