//! Hostile input at the edges of the line contract, on the built binary: a byte order mark
//! before the first line, files of blank lines, dim values long enough to break a store's
//! index, floods of bad lines that would once have become as many dead-letter rows, and a
//! number that overflows a float where a field mapping's pointer leads.

use hotlist_tests::pg_schema::PgSchema;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const CONFIG: &str = "[job]\nid = \"t\"\n[source]\nkind = \"file\"\npath = \"in/*.jsonl\"\n\
    [[window]]\nname = \"1m\"\nsize = \"1m\"\nk = 10\n[sink]\npath = \"out.db\"\n";

/// Runs the job in `dir` (config `hotlist.toml`), which must succeed; returns its stdout.
fn run(dir: &Path) -> String {
    let out = hotlist_tests::run_hotlist(dir, &["run", "--config", "hotlist.toml", "--progress", "never"], true);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes `lines` as `in/a.jsonl` and the config.
fn setup(config: &str, input: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("in")).expect("mkdir");
    std::fs::write(dir.path().join("in/a.jsonl"), input).expect("input");
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    dir
}

/// (reason, detail) of every dead letter of job `t`, and `a`'s count in minute 0.
fn sqlite_results(db: &Path) -> (Vec<(String, String)>, Option<i64>) {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut stmt = conn
        .prepare("SELECT reason, detail FROM dead_letters WHERE job = 't' ORDER BY position")
        .expect("prepare");
    let dead = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<Vec<_>, _>>()
        .expect("rows");
    let count = conn
        .query_row(
            "SELECT count FROM topk WHERE job = 't' AND window_start = 0 AND item_id = 'a'",
            [],
            |r| r.get(0),
        )
        .ok();
    (dead, count)
}

const BOM: &[u8] = b"\xEF\xBB\xBF";
const TWO_EVENTS: &[u8] = b"{\"item_id\":\"a\",\"ts\":1000}\n{\"item_id\":\"a\",\"ts\":2000}\n";

/// A file (and a stdin stream) that starts with a UTF-8 byte order mark, as editors on Windows
/// save it: the mark is dropped, the first line counts, nothing is a dead letter. (Before, the
/// first line was a `bad` dead letter: "not a JSON object".)
#[test]
fn a_byte_order_mark_before_the_first_line_is_dropped() {
    let input = [BOM, TWO_EVENTS].concat();
    let dir = setup(CONFIG, &input);
    run(dir.path());
    assert_eq!(sqlite_results(&dir.path().join("out.db")), (vec![], Some(2)));

    let dir = setup(&CONFIG.replace("in/*.jsonl", "-"), b"");
    let mut child = Command::new(hotlist_tests::hotlist_bin())
        .args(["run", "--config", "hotlist.toml", "--progress", "never"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hotlist");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&input)
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(sqlite_results(&dir.path().join("out.db")), (vec![], Some(2)));
}

/// 3,000,000 empty lines and a few of spaces, tabs and `\r`: no dead letter (they used to be
/// one `bad` row each, gigabytes of memory between checkpoints), every one counted as a blank
/// line in the run's summary, and the events among them counted.
#[test]
fn millions_of_blank_lines_are_counted_not_dead_lettered() {
    let mut input = Vec::with_capacity(3_100_000);
    input.extend_from_slice(b"{\"item_id\":\"a\",\"ts\":1000}\n");
    input.resize(input.len() + 3_000_000, b'\n');
    input.extend_from_slice(b"  \n\t\r\n \t \n{\"item_id\":\"a\",\"ts\":2000}\n");
    let dir = setup(CONFIG, &input);
    let stdout = run(dir.path());
    assert!(
        stdout.contains("3000005 records, 2 events")
            && stdout.contains(" 0 bad,")
            && stdout.contains(" 3000003 blank lines;"),
        "{stdout}"
    );
    assert_eq!(sqlite_results(&dir.path().join("out.db")), (vec![], Some(2)));
}

/// One event whose dim value is 10 KB (its group key, percent-encoded, up to 30 KB) in a `by`
/// window, into real PostgreSQL: it used to make the commit fail ("index row size … exceeds
/// btree version 4 maximum 2704"), a permanent store error on every restart. Now the job
/// finishes, the event is a `bad` dead letter naming the dim, and the other events count.
#[test]
fn a_10_kb_dim_value_is_a_bad_dead_letter_naming_the_dim() {
    let _postgres = hotlist_tests::serial::postgres();
    let pg = PgSchema::new("hotlist_edges");
    let event = |item: &str, ts: i64, country: &str| {
        format!("{{\"item_id\":\"{item}\",\"ts\":{ts},\"dims\":{{\"country\":\"{country}\"}}}}\n")
    };
    let long = "é".repeat(5_000);
    let input = [
        event("a", 1000, "US"),
        event("a", 2000, &long),
        event("a", 3000, "US"),
        event("b", 4000, "DE"),
    ]
    .concat();
    let config = CONFIG
        .replace("k = 10\n", "k = 10\nby = [\"country\"]\n")
        .replace("[sink]\npath = \"out.db\"\n", &pg.sink());
    let dir = setup(&config, input.as_bytes());
    let stdout = run(dir.path());
    assert!(
        stdout.contains("4 records, 3 events") && stdout.contains(" 1 bad,"),
        "{stdout}"
    );
    let mut c = pg.client();
    let dead: Vec<(String, i64, String)> = c
        .query("SELECT reason, position, detail FROM dead_letters WHERE job = 't'", &[])
        .expect("dead letters")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        dead,
        [(
            "bad".to_string(),
            2,
            "dims.country is 10000 bytes long (at most 256, source.format.max_dim_bytes)".to_string()
        )]
    );
    let rows: Vec<(String, String, i64)> = c
        .query(
            "SELECT group_key, item_id, count FROM topk WHERE job = 't' ORDER BY group_key, rank",
            &[],
        )
        .expect("lists")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        rows,
        [
            ("country=DE".to_string(), "b".to_string(), 1),
            ("country=US".to_string(), "a".to_string(), 2)
        ]
    );
}

/// Under a field mapping, a number that overflows a float where a pointer leads (here where
/// `/who/c` expects an object) makes the line a `bad` dead letter, as serde_json's reading of
/// it says, whichever of the mapping's two readers takes the line; the line beside it with a
/// number that fits counts, its country empty. (Before, the fast scan skipped the number and
/// counted the line.)
#[test]
fn a_number_out_of_a_floats_range_on_a_pointers_way_is_a_bad_dead_letter() {
    let config = CONFIG
        .replace(
            "path = \"in/*.jsonl\"\n",
            "path = \"in/*.jsonl\"\n[source.format]\nitem_id = \"/item_id\"\nts = \"/ts\"\ndims = { country = \"/who/c\" }\n",
        )
        .replace("k = 10\n", "k = 10\nby = [\"country\"]\n");
    let input = b"{\"item_id\":\"a\",\"ts\":1000,\"who\":1e999}\n{\"item_id\":\"a\",\"ts\":2000,\"who\":1e99}\n";
    let dir = setup(&config, input);
    let stdout = run(dir.path());
    assert!(
        stdout.contains("2 records, 1 events") && stdout.contains(" 1 bad,"),
        "{stdout}"
    );
    let (dead, count) = sqlite_results(&dir.path().join("out.db"));
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].0, "bad");
    assert!(dead[0].1.contains("number out of range"), "{dead:?}");
    assert_eq!(count, Some(1));
}
