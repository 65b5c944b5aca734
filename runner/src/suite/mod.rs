//! Suites: the vocabulary ([`model`]), loading with spans kept, validation and matrix
//! expansion (being written).

pub mod model;

use model::{Requirement, Step};

/// A case after matrix expansion: every `$name` parameter resolved, suite-level
/// requirements merged in. What the runner executes.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpandedCase {
    /// The suite's short name.
    pub suite: String,
    /// The case name with its matrix values: `boundaries/lbads=512`.
    pub name: String,
    pub title: String,
    pub rule: String,
    /// The suite's requirements, then the case's.
    pub requires: Vec<Requirement>,
    pub destructive: bool,
    pub steps: Vec<Step>,
}
