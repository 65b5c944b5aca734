//! The simulated NVMe subsystem (to be written).
