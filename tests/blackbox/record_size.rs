//! Record size on the built binary: a 300 MB line (in a file, and on stdin) is one `too_large`
//! dead letter keeping its first 4 KiB and its true length, read without buffering it whole
//! (peak RSS stays far below the line's size), and the lines after it are counted.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The huge line: 300 MB, no newline inside.
const HUGE: u64 = 300 << 20;

/// Peak RSS the job may reach while reading it (it measured ~25 MB; reading the line whole needs
/// more than the line).
const MAX_PEAK_RSS: u64 = 200 << 20;

const CONFIG: &str = "[job]\nid = \"t\"\n[source]\nkind = \"file\"\npath = \"in/*.jsonl\"\n\
    [[window]]\nname = \"1m\"\nsize = \"1m\"\nk = 10\n[sink]\npath = \"out.db\"\n";

/// The lines after the huge one, and what they count: 3 events of `after` in minute 0.
const AFTER: &str = "{\"item_id\":\"after\",\"ts\":1000}\n{\"item_id\":\"after\",\"ts\":2000}\n\
    {\"item_id\":\"after\",\"ts\":3000}\n";

/// Writes the huge line (a JSON-looking start, then `x`s) into `w`, 1 MiB at a time.
fn write_huge(w: &mut impl Write) -> std::io::Result<()> {
    let mut chunk = vec![b'x'; 1 << 20];
    chunk[..14].copy_from_slice(b"{\"item_id\":\"aa");
    w.write_all(&chunk)?;
    chunk[..14].fill(b'x');
    for _ in 1..(HUGE >> 20) {
        w.write_all(&chunk)?;
    }
    Ok(())
}

/// Waits for `child`, sampling its peak RSS (`VmHWM`) until it exits; returns the exit status
/// and the largest peak seen.
fn wait_sampling_peak(child: &mut Child) -> (std::process::ExitStatus, u64) {
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    loop {
        if let Ok(text) = std::fs::read_to_string(&status_path) {
            let hwm = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            if let Some(kb) = hwm {
                peak = peak.max(kb * 1024);
            }
        }
        if let Some(status) = child.try_wait().expect("try_wait") {
            return (status, peak);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the job did not finish within 300 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The one dead letter's (position, reason, detail, raw) and the count of `after` in minute 0.
fn results(db: &Path) -> ((i64, String, String, Vec<u8>), i64) {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let dead = conn
        .query_row(
            "SELECT position, reason, detail, raw FROM dead_letters WHERE job = 't'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .expect("exactly one dead letter");
    let count = conn
        .query_row(
            "SELECT count FROM topk WHERE job = 't' AND window_start = 0 AND item_id = 'after'",
            [],
            |r| r.get(0),
        )
        .expect("the lines after it are counted");
    (dead, count)
}

fn check(db: &Path, peak: u64) {
    let ((position, reason, detail, raw), count) = results(db);
    assert_eq!((position, reason.as_str(), count), (1, "too_large", 3));
    assert_eq!(
        detail,
        format!("record is {HUGE} bytes, more than source.max_record_bytes (1048576); raw keeps its first 4096")
    );
    assert_eq!(raw.len(), 4096);
    assert!(raw.starts_with(b"{\"item_id\":\"aaxxx"), "{:?}", &raw[..20]);
    assert!(peak > 0 && peak < MAX_PEAK_RSS, "peak RSS {} MB", peak >> 20);
}

fn spawn(dir: &Path, stdin: Stdio) -> Child {
    Command::new(hotlist_tests::hotlist_bin())
        .args(["run", "--config", "hotlist.toml", "--progress", "never"])
        .current_dir(dir)
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hotlist")
}

/// A file whose first line is 300 MB long: the job finishes, the dead letter holds 4096 raw
/// bytes and the true length, the following lines are counted, peak RSS stays bounded.
#[test]
fn a_300_mb_line_in_a_file_is_one_too_large_dead_letter() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let path = dir.path().join("in/a.jsonl");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
        write_huge(&mut f).expect("write the huge line");
        f.write_all(b"\n").expect("newline");
        f.write_all(AFTER.as_bytes()).expect("the lines after");
        f.flush().expect("flush");
    }
    std::fs::write(dir.path().join("hotlist.toml"), CONFIG).expect("config");
    let mut child = spawn(dir.path(), Stdio::null());
    let (status, peak) = wait_sampling_peak(&mut child);
    let err = child.stderr.take().map(std::io::read_to_string);
    assert!(status.success(), "{status}: {err:?}");
    std::fs::remove_file(&path).expect("delete the 300 MB file");
    check(&dir.path().join("out.db"), peak);
}

/// The same line on standard input, written while the job reads.
#[test]
fn a_300_mb_line_on_stdin_is_one_too_large_dead_letter() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("hotlist.toml"), CONFIG.replace("in/*.jsonl", "-")).expect("config");
    let mut child = spawn(dir.path(), Stdio::piped());
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        write_huge(&mut stdin)?;
        stdin.write_all(b"\n")?;
        stdin.write_all(AFTER.as_bytes())
    });
    let (status, peak) = wait_sampling_peak(&mut child);
    writer.join().expect("writer thread").expect("write stdin");
    let err = child.stderr.take().map(std::io::read_to_string);
    assert!(status.success(), "{status}: {err:?}");
    check(&dir.path().join("out.db"), peak);
}
