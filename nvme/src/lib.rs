//! The NVMe protocol and the host side of nvtest.
//!
//! - [`spec`] mirrors the NVMe 1.4 (and 1.2a) specification: one typed structure per
//!   spec structure, each naming its figure, sizes asserted at compile time.
//! - [`transport`] is what a host driver talks through: PCI configuration space, BAR0
//!   MMIO, and host memory a controller reaches by DMA.
//! - [`driver`] is the userspace host driver (controller bring-up, queues, PRPs,
//!   completions) that turns a transport into a [`device::Device`].
//! - [`device`] is the command-level interface every target offers to the runner.
//! - [`input`] reads the small text files nvtest is given (suites, profiles, topologies)
//!   with a bound on their size.
//! - [`fw_image`] is nvtest's test firmware image format.
//!
//! This crate knows neither the simulated drive nor the runner.

#[cfg(not(target_endian = "little"))]
compile_error!("nvme's spec structures are laid out for a little-endian host, as NVMe is");

pub mod device;
pub mod driver;
pub mod fw_image;
pub mod input;
pub mod linux;
pub mod queued;
pub mod spec;
pub mod transport;
