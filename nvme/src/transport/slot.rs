//! A hot-plug slot: what a transport offers when its function sits in a slot the host can
//! empty and fill again (PCI Express Base Specification, "Hot-Plug": a downstream port
//! with a Power Controller, driven through Slot Control). Owns only the slot's interface;
//! the implementations live with their transports (QEMU: [`super::qemu`]).
//!
//! The driver is never told of a removal by the slot: it finds the function gone as a
//! host does, from its own register and configuration reads.

use super::TransportError;

/// What an insertion took, on the transport's clock ([`super::Transport::now_ns`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insertion {
    /// When the slot's power went on (Slot Control, Power Controller Control = 0).
    pub powered_on_at_ns: u64,
    /// From power-on to the link up (Link Status, Data Link Layer Link Active), where the
    /// port reports it (Link Capabilities, Data Link Layer Link Active Reporting Capable).
    pub link_up_ns: Option<u64>,
    /// From power-on to the function enumerated again: answering configuration reads,
    /// its BARs assigned, Memory Space and Bus Master enabled.
    pub enumerated_ns: u64,
}

/// A slot holding the transport's function.
pub trait Slot {
    /// Pulls the drive now, whatever it is doing: its power goes without warning (Slot
    /// Control, Power Controller Control = 1, no attention button, no driver told).
    fn surprise_removal(&mut self) -> Result<(), TransportError>;

    /// Removes the drive as an operator does after the host shut it down: the attention
    /// button, then the slot's power off, waiting (bounded) until the function is gone.
    fn orderly_removal(&mut self) -> Result<(), TransportError>;

    /// Puts the drive back in the same slot and powers it on; returns once the function
    /// is enumerated (the controller behind it still to be brought up, from its reset
    /// state). The function keeps its address; BAR0 may move, and the transport follows it.
    fn insert(&mut self) -> Result<Insertion, TransportError>;
}
