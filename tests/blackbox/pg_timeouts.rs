//! PostgreSQL client timeouts on the binary: a server that stops answering (here a TCP proxy
//! in front of the local server that stops forwarding, as a SIGSTOPped server or a hung host
//! does: connections stay open, nothing comes back) makes the writer fail with a timeout
//! error naming the wait, retry, and go on when the server answers again, instead of waiting
//! forever.

use hotlist_tests::proxy::FreezableProxy;
use hotlist_tests::{free_loopback_ports, reap};
use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The job's metric `name` (summed over labels; 0 when absent).
fn metric(addr: &str, name: &str) -> f64 {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return 0.0;
    };
    let _ = s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes());
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body.lines()
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// The writer against a server that stops answering: within the statement timeout plus the
/// grace (2 s + 5 s here) it logs a retryable timeout naming the wait, keeps retrying, and
/// commits again once the server answers. (Before: only lock_timeout was set and the writer
/// waited for the reply forever, with no error.)
#[test]
fn a_frozen_server_times_out_and_the_writer_retries() {
    let _postgres = hotlist_tests::serial::postgres();
    let pg_url =
        std::env::var("HOTLIST_TEST_POSTGRES_URL").unwrap_or("postgresql://postgres@127.0.0.1:5432/test".into());
    let proxy = FreezableProxy::start("127.0.0.1:5432");
    let schema = format!("hotlist_timeouts_{}", std::process::id());
    struct DropSchema(String, String);
    impl Drop for DropSchema {
        fn drop(&mut self) {
            let _ = hotlist_sinks::postgres::drop_schema(&self.0, &self.1);
        }
    }
    let _cleanup = DropSchema(pg_url.clone(), schema.clone());
    let via_proxy = format!("postgresql://postgres@127.0.0.1:{}/test", proxy.port);
    let dir = tempfile::tempdir().expect("tempdir");
    let metrics_port = free_loopback_ports(1)[0];
    let config = format!(
        "[job]\nid = \"frozen\"\n[source]\nkind = \"generator\"\nitems = 100\nrate = 2000\npace = true\n\
         [time]\nemit_interval = \"100ms\"\n[[window]]\nname = \"10s\"\nsize = \"10s\"\nk = 5\n\
         [sink]\nkind = \"postgres\"\nurl = \"{via_proxy}\"\nschema = \"{schema}\"\n\
         connect_timeout = \"2s\"\nstatement_timeout = \"2s\"\n"
    );
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let addr = format!("127.0.0.1:{metrics_port}");
    let mut child = Command::new(hotlist_tests::hotlist_bin())
        .args([
            "run",
            "--config",
            "hotlist.toml",
            "--progress",
            "never",
            "--metrics-addr",
            &addr,
        ])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hotlist run");
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let stderr = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.lock().expect("lines").push(l);
        }
    });
    let wait = |what: &str, within: Duration, f: &mut dyn FnMut() -> bool| {
        let deadline = Instant::now() + within;
        while !f() {
            let log = lines.lock().expect("lines").join("\n");
            assert!(
                Instant::now() < deadline,
                "timed out after {within:?} waiting for {what}\n{log}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait("a first commit", Duration::from_secs(60), &mut || {
        metric(&addr, "hotlist_committed_epoch") > 0.0
    });

    proxy.freeze();
    let frozen_at = Instant::now();
    let timeout_line = |l: &String| {
        l.contains("sink commit failed")
            && l.contains("timeout waiting for server")
            && l.contains("no reply within")
            && l.contains("sink.statement_timeout")
    };
    wait("a timeout error from the writer", Duration::from_secs(30), &mut || {
        lines.lock().expect("lines").iter().any(timeout_line)
    });
    let took = frozen_at.elapsed();
    assert!(took < Duration::from_secs(20), "the timeout came after {took:?}");
    // it keeps retrying (connecting times out too) while the server is frozen
    wait("a second failed attempt", Duration::from_secs(30), &mut || {
        lines
            .lock()
            .expect("lines")
            .iter()
            .filter(|l| l.contains("sink commit failed"))
            .count()
            >= 2
    });

    proxy.thaw();
    let committed = metric(&addr, "hotlist_committed_epoch");
    wait(
        "commits after the server answers again",
        Duration::from_secs(60),
        &mut || metric(&addr, "hotlist_committed_epoch") > committed + 2.0,
    );
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill")
        .success());
    assert!(
        reap(&mut child, Duration::from_secs(60)),
        "the job did not stop on SIGTERM"
    );
    let status = child.wait().expect("wait");
    let log = lines.lock().expect("lines").join("\n");
    assert!(status.success(), "{status:?}\n{log}");
}
