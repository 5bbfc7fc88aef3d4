//! The Kafka-protocol broker of the Kafka tests: tansu on a loopback port, and the edits of its
//! storage that tansu does not offer through the protocol.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The tansu binary: $HOTLIST_TANSU, the project's tool cache, or PATH.
fn tansu_bin() -> PathBuf {
    let candidates = [
        std::env::var("HOTLIST_TANSU").ok().map(PathBuf::from),
        std::env::var("HOME")
            .ok()
            .map(|h| PathBuf::from(h).join(".cache/hotlist-tools/bin/tansu")),
        Some(PathBuf::from("/root/.cache/hotlist-tools/bin/tansu")),
    ];
    for c in candidates.into_iter().flatten() {
        if c.exists() {
            return c;
        }
    }
    if Command::new("tansu").arg("--help").output().is_ok() {
        return PathBuf::from("tansu");
    }
    panic!("tansu (the Kafka-protocol broker) is not installed: scripts/test installs it into ~/.cache/hotlist-tools");
}

/// A broker on a loopback port with SQLite storage in `dir` (restartable on the same data).
pub(super) struct Broker {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Broker {
    pub(super) fn start(dir: &Path) -> Broker {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let mut b = Broker {
            dir: dir.to_path_buf(),
            port,
            child: None,
        };
        b.restart();
        b
    }

    pub(super) fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub(super) fn restart(&mut self) {
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let child = Command::new(tansu_bin())
            .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url])
            .args(["--storage-engine", "sqlite://broker.db"]) // relative: sqlite:///abs is mis-parsed
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn tansu");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(self.addr()).is_err() {
            assert!(
                Instant::now() < deadline,
                "tansu did not start listening on {}",
                self.addr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(super) fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Broker {
    /// Stops the broker, runs `sql` on its SQLite storage and starts it again: how these tests
    /// do what tansu does not offer through the Kafka protocol (`CreatePartitions` is
    /// unsupported, `DeleteRecords` unimplemented): adding partitions to a topic, and deleting
    /// messages as retention would.
    pub(super) fn edit_storage(&mut self, sql: &str) {
        self.stop();
        let conn = rusqlite::Connection::open(self.dir.join("broker.db")).expect("open the broker's storage");
        conn.execute_batch(sql).expect("edit the broker's storage");
        drop(conn);
        self.restart();
    }

    /// Deletes `topic` (tansu's own admin command).
    pub(super) fn delete_topic(&self, topic: &str) {
        let out = Command::new(tansu_bin())
            .args(["topic", "delete", "--broker", &format!("tcp://{}", self.addr()), topic])
            .output()
            .expect("run tansu topic delete");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

/// SQL on tansu's storage: the row id of `topic`'s partition `p`.
fn topition(topic: &str, p: u32) -> String {
    format!("(SELECT tp.id FROM topition tp JOIN topic t ON tp.topic = t.id WHERE t.name = '{topic}' AND tp.partition = {p})")
}

/// SQL on tansu's storage: retention deleted `topic`'s partition `p` below offset `low`.
pub(super) fn retention_deletes_below(topic: &str, p: u32, low: u64) -> String {
    let tp = topition(topic, p);
    format!("UPDATE watermark SET low = {low} WHERE topition = {tp}; DELETE FROM record WHERE topition = {tp} AND offset_id < {low};")
}

/// SQL on tansu's storage: `topic` grows from `from` to `to` partitions.
pub(super) fn add_partitions(topic: &str, from: u32, to: u32) -> String {
    let mut sql = format!("UPDATE topic SET partitions = {to} WHERE name = '{topic}';");
    for p in from..to {
        sql.push_str(&format!(
            "INSERT INTO topition (topic, partition) SELECT id, {p} FROM topic WHERE name = '{topic}';\
             INSERT INTO watermark (topition) SELECT {};",
            topition(topic, p)
        ));
    }
    sql
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
    }
}
