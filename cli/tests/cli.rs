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

/// GET `path` from `addr` over plain HTTP/1.0; returns the body.
fn http_get(addr: &str, path: &str) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr)?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default())
}

/// A running job serves Prometheus metrics (per-partition counters and watermarks, commit
/// latency) on --metrics-addr, and SIGTERM stops it cleanly: exit 0, everything committed.
#[test]
fn job_metrics_and_graceful_sigterm() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = "[source]\nkind = \"generator\"\nitems = 1000\npartitions = 3\nrate = 2000\npace = true\n\
                  [[window]]\nname = \"1m\"\nsize = \"1m\"\nk = 5\n[sink]\npath = \"m.db\"\n";
    std::fs::write(dir.path().join("m.toml"), config).expect("config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hotlist"))
        .args([
            "run",
            "--config",
            "m.toml",
            "--progress",
            "never",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines.next().expect("a metrics line before EOF").expect("read stderr");
        if let Some(rest) = line.strip_prefix("metrics on http://") {
            break rest.trim_end_matches("/metrics").to_string();
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let body = loop {
        let body = http_get(&addr, "/metrics").expect("scrape");
        let committed = body
            .lines()
            .any(|l| l.starts_with("hotlist_commits_total") && !l.ends_with(" 0"));
        let counted = body
            .lines()
            .any(|l| l.starts_with("hotlist_events_total{") && !l.ends_with(" 0"));
        if committed && counted {
            break body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "metrics never showed progress:\n{body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    for p in 0..3 {
        let series = format!("partition=\"{p}\",source=\"generator:{p}\"");
        assert!(
            body.lines()
                .any(|l| l.starts_with("hotlist_events_total{") && l.contains(&series)),
            "{body}"
        );
    }
    assert!(
        body.lines()
            .any(|l| l.starts_with("hotlist_partition_watermark_lag_seconds{") && l.contains("partition=\"2\"")),
        "{body}"
    );
    assert!(body.contains("# TYPE hotlist_commits_total counter"), "{body}");
    assert!(body.contains("hotlist_sink_commit_seconds_bucket"), "{body}");
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill")
        .success());
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "graceful stop exits 0: {:?}", out.status);
    assert!(String::from_utf8_lossy(&out.stdout).contains("stopped after"));
}
