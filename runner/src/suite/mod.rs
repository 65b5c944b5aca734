//! Suites: the vocabulary ([`model`]), loading with spans kept, validation and matrix
//! expansion (to be written).

pub mod model;
