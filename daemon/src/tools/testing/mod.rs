//! Deterministic tools the tests drive (cargo feature `test-tools`, which
//! only the tests crate turns on; never part of a default build).

pub mod block;
pub mod echo;
pub mod external;
pub mod flags;
pub mod shell;
pub mod sleep;
