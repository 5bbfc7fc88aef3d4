//! The server at the process's open-file limit (in a process of its own: it lowers the limit
//! of the whole process). The connection limit is set far above the file limit, so what is
//! tested is the accept loop's answer to EMFILE: close the longest-idle connection and accept,
//! instead of retrying `accept` for ever while idle sockets hold every descriptor.
#![cfg(target_os = "linux")]

use hotlist_server::limits::ConnectionLimits;
use hotlist_sinks::{SinkError, StoreReader};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

const IDLE_CONNECTIONS: usize = 50;

/// The highest file descriptor number this process has open.
fn highest_fd() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .expect("list /proc/self/fd")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .expect("some descriptor is open")
}

/// Waits (bounded) until `conn` is closed by the server.
fn closed_by_server(conn: &mut TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    conn.set_read_timeout(Some(Duration::from_millis(50)))
        .expect("read timeout");
    let mut buf = [0u8; 64];
    while Instant::now() < deadline {
        match conn.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return true, // reset
        }
    }
    false
}

/// With every file descriptor of the process taken (idle clients hold the server's side of
/// theirs), a new client's `/healthz` is still answered: the longest-idle connection is closed
/// to make room.
#[test]
fn healthz_answers_when_the_process_is_out_of_file_descriptors() {
    in_a_process_of_its_own(
        "fd_limit::healthz_answers_when_the_process_is_out_of_file_descriptors",
        out_of_file_descriptors,
    );
}

/// Runs `test` in a new process of this test binary that runs only the test `name` (its path,
/// `module::test`), and fails when that process fails; in that process, runs `test`. (The other
/// tests of the binary run on threads of this process: they would open files while the limit
/// is low, and take the descriptors the test counts on.)
fn in_a_process_of_its_own(name: &str, test: fn()) {
    const VAR: &str = "HOTLIST_TEST_IN_OWN_PROCESS";
    if std::env::var(VAR).is_ok_and(|v| v == name) {
        return test();
    }
    let exe = std::env::current_exe().expect("the path of this test binary");
    let out = std::process::Command::new(&exe)
        .args([name, "--exact", "--nocapture", "--test-threads", "1"])
        .env(VAR, name)
        .output()
        .unwrap_or_else(|e| panic!("run {} {name}: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(" 1 passed;"),
        "{name}, in a process of its own: {}\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let open: Arc<dyn Fn() -> Result<Box<dyn StoreReader>, SinkError> + Send + Sync> =
        Arc::new(|| Err(SinkError::NoDatabase { path: "none.db".into() })); // no store: no descriptors
    let options = hotlist_server::ServeOptions {
        job: "fd".into(),
        open,
        poll: Duration::from_millis(20),
        history_queue: hotlist_server::limits::DEFAULT_HISTORY_QUEUE,
        max_age: Duration::from_secs(1),
        limits: ConnectionLimits {
            header_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            max_connections: 100_000, // far above the file limit: only EMFILE can stop accepts
            ..ConnectionLimits::default()
        },
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(hotlist_server::run(listener, options, async {
        let _ = stop_rx.await;
    }));

    let answered = tokio::task::spawn_blocking(move || {
        // idle clients, each served once (so the server has accepted every one of them)
        let mut idle: Vec<TcpStream> = (0..IDLE_CONNECTIONS)
            .map(|_| {
                let mut c = TcpStream::connect(addr).expect("connect");
                c.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n").expect("write");
                let mut buf = [0u8; 512];
                assert!(c.read(&mut buf).expect("read") > 0, "answered");
                c
            })
            .collect();
        // Take every descriptor the process may still open, then give back exactly one: the
        // new client's socket takes it, and the server's accept finds none.
        let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
        let limit = highest_fd() + 2;
        rustix::process::setrlimit(
            rustix::process::Resource::Nofile,
            rustix::process::Rlimit {
                current: Some(limit),
                maximum: hard,
            },
        )
        .expect("lower the open-file limit");
        let mut fillers = Vec::new();
        while let Ok(f) = std::fs::File::open("/dev/null") {
            fillers.push(f);
        }
        assert!(!fillers.is_empty(), "the limit leaves room for a filler");
        fillers.pop();
        let started = Instant::now();
        let mut probe = TcpStream::connect(addr).expect("connect with the last descriptor");
        probe.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        probe
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .expect("write");
        let mut response = String::new();
        let read = probe.read_to_string(&mut response);
        let took = started.elapsed();
        let oldest_closed = closed_by_server(&mut idle[0], Duration::from_secs(5));
        drop(fillers);
        (read.map(|_| response), took, oldest_closed)
    })
    .await
    .expect("client thread");

    let (response, took, oldest_closed) = answered;
    let response = response.expect("/healthz answered");
    assert!(
        response.starts_with("HTTP/1.1 503"),
        "degraded (no store), but answered: {response}"
    );
    assert!(took < Duration::from_secs(2), "answered promptly: {took:?}");
    assert!(oldest_closed, "the longest-idle connection was closed to make room");
    let _ = stop_tx.send(());
    server.await.expect("join").expect("server ran");
}
