//! Read errors on the built binary: an input file that cannot be read fails the run (exit 1,
//! one line naming the file and the byte offset) instead of ending its partition, which would
//! seal the other partitions' windows as if the file had been read.

use hotlist_tests::run_hotlist;

/// One good file and one that fails to read (a link to the job's own `/proc/self/mem`, whose
/// first page is unmapped: reading it is an I/O error): exit 1, the error names the file and
/// the offset, and no list was sealed.
#[test]
fn a_file_that_cannot_be_read_fails_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    let lines: String = (0..200)
        .map(|i| format!("{{\"item_id\":\"i{}\",\"ts\":{}}}\n", i % 7, i * 1000))
        .collect();
    std::fs::write(dir.path().join("in/a.jsonl"), lines).expect("input");
    std::os::unix::fs::symlink("/proc/self/mem", dir.path().join("in/b.jsonl")).expect("symlink");
    let config = "[job]\nid = \"t\"\n[source]\nkind = \"file\"\npath = \"in/*.jsonl\"\n\
                  [[window]]\nname = \"10s\"\nsize = \"10s\"\nk = 5\n[sink]\npath = \"out.db\"\n";
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let out = run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        false,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let last = err.trim().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: partition 1: reading in/b.jsonl failed at byte 0 (line 1): "),
        "{err}"
    );
    let conn = rusqlite::Connection::open(dir.path().join("out.db")).expect("open db");
    let sealed: i64 = conn
        .query_row("SELECT count(*) FROM topk_instances WHERE final = 1", [], |r| r.get(0))
        .expect("query");
    assert_eq!(sealed, 0, "nothing sealed from a partially read input");
}
