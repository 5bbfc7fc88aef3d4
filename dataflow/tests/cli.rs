//! The `hotlist` command line: help, usage errors and exit codes. (Also makes
//! `cargo test --workspace` build the binary that the end-to-end tests run.)

use std::process::Command;

fn hotlist(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hotlist"))
        .args(args)
        .output()
        .expect("spawn hotlist")
}

/// `--help` names every subcommand; bad usage exits 2.
#[test]
fn help_and_usage() {
    let out = hotlist(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for sub in ["run", "query", "bench", "generate"] {
        assert!(text.contains(sub), "help mentions {sub}: {text}");
    }
    assert_eq!(hotlist(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(hotlist(&["query"]).status.code(), Some(2), "--window is required");
}

/// A missing config file is one clear line naming the file, exit 1.
#[test]
fn missing_config_is_one_line() {
    let out = hotlist(&["run", "--config", "/nonexistent/hotlist.toml"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: cannot read config /nonexistent/hotlist.toml"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1);
}

/// Querying a store that does not exist says so and exits 1.
#[test]
fn query_without_store() {
    let out = hotlist(&["query", "--db", "/nonexistent/out.db", "--window", "1m"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/out.db"));
}
