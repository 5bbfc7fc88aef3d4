//! Shared pieces of hotlist's end-to-end and oracle tests.
//!
//! - [`model`]: a brute-force, obviously-correct model of DESIGN.md's rules (event contract,
//!   per-partition lateness, windows, ranking) that the job's sealed output must equal;
//! - [`inputs`]: random and fixed input files (events, disorder, late events, bad lines).

pub mod inputs;
pub mod model;
