//! Shared pieces of hotlist's end-to-end and oracle tests.
//!
//! - [`model`]: a brute-force, obviously-correct model of DESIGN.md's rules (event contract,
//!   per-partition lateness, windows, ranking) that the job's sealed output must equal;
//! - [`inputs`]: random and fixed input files (events, disorder, late events, bad lines).

pub mod inputs;
pub mod model;

use std::path::PathBuf;
use std::process::{Command, Output};

/// The built `hotlist` binary (target/<profile>/hotlist next to this test's deps directory).
/// `cargo test --workspace` builds it (the dataflow crate's own CLI tests need it).
pub fn hotlist_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let bin = profile_dir.join("hotlist");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p hotlist-dataflow` (or `cargo test --workspace`, which builds it)",
        bin.display()
    );
    bin
}

/// Runs `hotlist` with `args` in `dir`; panics with stdout/stderr and a listing if it fails
/// and `expect_ok` is set.
pub fn run_hotlist(dir: &std::path::Path, args: &[&str], expect_ok: bool) -> Output {
    let out = Command::new(hotlist_bin())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("spawn hotlist");
    if expect_ok && !out.status.success() {
        let listing: Vec<String> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        panic!(
            "hotlist {args:?} failed ({}) in {}\n--- stdout\n{}\n--- stderr\n{}\n--- files: {listing:?}",
            out.status,
            dir.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}
