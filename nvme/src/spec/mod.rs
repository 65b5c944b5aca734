//! The NVMe specification as types, one module per spec area.
//!
//! Figure and section names are those of NVM Express Base Specification 1.4
//! (and 1.2a where a structure differs). Every structure has its size asserted at
//! compile time; no other module reads a spec structure by raw offset.

pub mod ana;
pub mod command;
pub mod features;
pub mod firmware;
pub mod identify;
pub mod log;
pub mod namespace;
pub mod nvm;
pub mod queue;
pub mod registers;
pub mod reservation;
pub mod sanitize;
pub mod status;
pub mod version;

pub use command::{AdminOpcode, Command, Completion, NvmOpcode};
pub use status::{Status, StatusCodeType};
pub use version::Version;

/// Asserts at compile time that a spec structure has the size the spec gives it.
#[macro_export]
macro_rules! assert_size {
    ($t:ty, $n:expr) => {
        const _: () = assert!(::core::mem::size_of::<$t>() == $n);
    };
}
