//! State that must not grow with rotating group values: the run's map of latest committed
//! lists (the gauge `hotlist_latest_lists`, which the live display copies) and Redis's
//! per-group keys and groups set (Redis as the sink here; the fan-out writes through the same
//! commit script) keep only the groups of each window's live instances, however many
//! instances with new groups the job goes through.

use super::fanout::RedisServer;
use hotlist_tests::{free_loopback_ports, reap};
use std::io::{BufRead, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed (by its id) if still running when dropped, as when a test fails.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The job's metrics (summed over labels), by name.
fn scrape(addr: &str) -> std::collections::BTreeMap<String, f64> {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the metrics endpoint");
    s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .expect("request metrics");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("read metrics");
    let mut out = std::collections::BTreeMap::new();
    for l in body.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, value)) = l.rsplit_once(' ') else {
            continue;
        };
        let (Some(name), Ok(value)) = (name.split('{').next(), value.parse::<f64>()) else {
            continue;
        };
        *out.entry(name.to_string()).or_insert(0.0) += value;
    }
    out
}

/// `hotlist run` of `dir`'s hotlist.toml reading stdin (piped), with `extra` arguments and its
/// metrics on a free port: the process and the metrics' address (`host:port`).
fn spawn_on_stdin(dir: &std::path::Path, extra: &[&str]) -> (KillOnDrop, String) {
    let mut job = KillOnDrop(
        Command::new(hotlist_tests::hotlist_bin())
            .args(["run", "--config", "hotlist.toml", "--progress", "never"])
            .args(extra)
            .args(["--metrics-addr", "127.0.0.1:0"])
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hotlist run"),
    );
    let mut stderr = std::io::BufReader::new(job.0.stderr.take().expect("stderr")).lines();
    let metrics = loop {
        let line = stderr.next().expect("a metrics line").expect("read stderr");
        if let Some(rest) = line.strip_prefix("metrics on http://") {
            break rest.trim_end_matches("/metrics").to_string();
        }
    };
    std::thread::spawn(move || stderr.for_each(drop));
    (job, metrics)
}

/// 300 one-second instances of a `by` window, each with 20 groups of its own (6,000 groups in
/// all), read from stdin into Redis: while the job runs, Redis keeps the keys of the last two
/// instances' groups only, and `hotlist_latest_lists` stays at those groups. (Before: the map, the display's copy
/// of it and Redis kept every group ever seen: 6,000 lists and 12,000 keys here.)
#[test]
fn rotating_groups_keep_the_latest_lists_bounded() {
    const INSTANCES: i64 = 300;
    const GROUPS: i64 = 20;
    let redis = RedisServer::start(free_loopback_ports(1)[0]);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "[job]\nid = \"rot\"\n[source]\nkind = \"file\"\npath = \"-\"\n\
         [time]\nmax_out_of_orderness = \"0s\"\nallowed_lateness = \"0s\"\nemit_interval = \"10ms\"\n\
         [[window]]\nname = \"1s\"\nsize = \"1s\"\nk = 2\nby = [\"g\"]\n\
         [sink]\nkind = \"redis\"\nurl = \"{}\"\n[run]\nepoch_interval = \"5ms\"\n",
        redis.url()
    );
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let (mut job, metrics) = spawn_on_stdin(dir.path(), &[]);
    let child = &mut job.0;
    let base = 1_713_462_000_000i64;
    let mut events = 0;
    {
        let mut stdin = std::io::BufWriter::new(child.stdin.as_mut().expect("stdin"));
        for instance in 0..INSTANCES {
            for e in 0..GROUPS * 3 {
                let ts = base + instance * 1000 + e * 10;
                let line = format!(
                    "{{\"item_id\":\"i{}\",\"ts\":{ts},\"dims\":{{\"g\":\"n{instance}-{}\"}}}}\n",
                    e % 5,
                    e % GROUPS
                );
                stdin.write_all(line.as_bytes()).expect("write stdin");
                events += 1;
            }
        }
        stdin.flush().expect("flush stdin");
    }
    // stdin stays open: the job runs on, its last instance open. Wait until the last
    // instance's lists are committed and the fan-out has written them.
    let last = hotlist_operators::time::Millis(base + (INSTANCES - 1) * 1000);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let m = scrape(&metrics);
        let latest = hotlist_sinks::RedisStore::connect(&redis.url(), "hotlist")
            .ok()
            .and_then(|mut s| hotlist_sinks::StoreReader::groups(&mut s, "rot", "1s").ok().flatten());
        let done = m.get("hotlist_events_total").copied().unwrap_or(0.0) >= events as f64
            && latest.is_some_and(|(start, groups)| start == last && groups.len() == GROUPS as usize);
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the job did not read and commit its input: {m:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut c = redis.connection().expect("redis answers");
    let keys: Vec<String> = redis::cmd("KEYS").arg("hotlist:rot:*").query(&mut c).expect("KEYS");
    let group_keys = keys.iter().filter(|k| k.contains(":group:")).count();
    let groups_set: u64 = redis::cmd("ZCARD")
        .arg("hotlist:rot:1s:groups")
        .query(&mut c)
        .expect("ZCARD");
    // two live instances of 20 groups (a tumbling window keeps the one before the newest)
    let bound = 2 * GROUPS as usize + 1;
    assert!(
        group_keys <= 2 * bound,
        "{group_keys} per-group keys in Redis, want at most {}",
        2 * bound
    );
    assert!(
        groups_set as usize <= bound,
        "{groups_set} members in the groups set, want at most {bound}"
    );
    // the map notes a commit's lists right after it: wait for them
    let lists = loop {
        let lists = scrape(&metrics).get("hotlist_latest_lists").copied();
        if lists.is_some_and(|l| l >= GROUPS as f64) {
            break lists.unwrap_or(0.0);
        }
        assert!(Instant::now() < deadline, "hotlist_latest_lists = {lists:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        lists <= bound as f64 && lists >= GROUPS as f64,
        "hotlist_latest_lists = {lists}, want at most {bound} (groups of the two live instances)"
    );
    drop(child.stdin.take());
    assert!(
        reap(child, Duration::from_secs(60)),
        "the job did not end with its input"
    );
}

/// A hostile input, a new group with every event, in a per-group sketch window that keeps two
/// groups (stdin, SQLite): the job's state (`hotlist_state_bytes`) stays where it was after
/// 2,000 groups when 60,000 more arrive, while the gauge of folded groups follows them (an
/// estimate beyond 1,024). Before, every instance kept the hash of every group it had seen, 8
/// bytes and more a group, however small its `max_groups`: over 1 MB more here.
#[test]
fn a_new_group_per_event_keeps_a_sketch_windows_state_bounded() {
    const FIRST: usize = 2_000;
    const THEN: usize = 60_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = "[job]\nid = \"hostile\"\n[source]\nkind = \"file\"\npath = \"-\"\n\
         [time]\nmax_out_of_orderness = \"0s\"\nemit_interval = \"20ms\"\n\
         [[window]]\nname = \"1h\"\nsize = \"1h\"\nk = 3\nby = [\"g\"]\nmax_groups = 2\nmode = \"sketch\"\n\
         [sink]\nkind = \"sqlite\"\npath = \"out.db\"\n[run]\nepoch_interval = \"5ms\"\n";
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let (mut job, metrics) = spawn_on_stdin(dir.path(), &["--workers", "1"]);
    let child = &mut job.0;
    let base = 1_713_462_000_000i64;
    let mut stdin = std::io::BufWriter::new(child.stdin.take().expect("stdin"));
    let mut write = |groups: std::ops::Range<usize>| {
        for g in groups {
            let line = format!(
                "{{\"item_id\":\"i{}\",\"ts\":{},\"dims\":{{\"g\":\"n{g}\"}}}}\n",
                g % 5,
                base + g as i64
            );
            stdin.write_all(line.as_bytes()).expect("write stdin");
        }
        stdin.flush().expect("flush stdin");
    };
    // the state once the job has counted `events` events of as many groups: the folded
    // groups' gauge is set right after the state's, so a scrape after it has counted them
    // all reads the state of then (or later)
    let state_after = |events: usize| {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let m = scrape(&metrics);
            let read = m.get("hotlist_events_total").copied().unwrap_or(0.0);
            let folded = m.get("hotlist_overflow_groups").copied().unwrap_or(0.0);
            if read >= events as f64 && folded >= 0.9 * (events - 2) as f64 {
                break scrape(&metrics)
                    .get("hotlist_state_bytes")
                    .copied()
                    .expect("a state gauge");
            }
            assert!(
                Instant::now() < deadline,
                "the job did not count its {events} events: {m:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    write(0..FIRST);
    let before = state_after(FIRST);
    write(FIRST..FIRST + THEN);
    let after = state_after(FIRST + THEN);
    assert!(
        after - before < 256.0 * 1024.0,
        "the state grew from {before} to {after} bytes with {THEN} more groups"
    );
    drop(stdin);
    assert!(
        reap(child, Duration::from_secs(60)),
        "the job did not end with its input"
    );
}
