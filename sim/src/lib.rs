//! A software NVMe subsystem that behaves like hardware at the register level.
//!
//! The host driver reaches it through [`pci::SimTransport`] (an implementation of
//! `nvme::transport::Transport`): configuration space, BAR0 registers and doorbells.
//! Commands are fetched from submission queues in host memory, their data moved by
//! DMA following PRPs, and completions posted with phase tags, as a real controller does.
//!
//! - [`pci`] and [`controller`]: the PCIe function, registers, CC/CSTS state, queues,
//!   doorbells, queue-management commands, Abort and Asynchronous Event Requests.
//! - [`exec`]: the contract between that queue engine and the command set.
//! - [`subsystem`]: the NVM subsystem: namespaces, media, the admin and NVM commands
//!   they answer, profiles and quirks.

pub mod controller;
pub mod exec;
pub mod pci;
pub mod profile;
pub mod subsystem;
