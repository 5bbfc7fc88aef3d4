//! The largest values the job admits, committed into real PostgreSQL: nothing the source
//! accepts may make a store refuse a commit (a refusal fails every retry and every restart).
//! docs/schema.md ("What fits in the stores") lists each text column with its bound; this test
//! commits every bound at once.

use hotlist_tests::pg_schema::PgSchema;
use std::path::Path;

/// A directory path of about 3,700 bytes below `base` (the source name `file:PATH` is text).
fn deep_dir(base: &Path) -> std::path::PathBuf {
    let mut dir = base.to_path_buf();
    for i in 0..15 {
        dir.push(format!("{i:02}{}", "d".repeat(240)));
    }
    std::fs::create_dir_all(&dir).expect("deep dirs");
    dir
}

/// Job id and window name of 128 bytes, a window grouping by 8 dims of 64-byte names whose
/// group key is exactly 2048 bytes (the most `source.format.max_group_key_bytes` allows),
/// 256-byte item ids (4-byte characters) in the lists and as a hot key, a 3.7 KB source name,
/// and a 1 MiB bad line (its raw bytes and its detail): the run commits all of it. A key one
/// byte longer is a `bad` dead letter.
#[test]
fn the_largest_admissible_values_commit_into_postgres() {
    let _postgres = hotlist_tests::serial::postgres();
    let pg = PgSchema::new("hotlist_limits");
    let dir = tempfile::tempdir().expect("tempdir");
    let input = deep_dir(dir.path());
    let job = "j".repeat(128);
    let window = "w".repeat(128);
    let names: Vec<String> = (0..8).map(|i| format!("{i}{}", "n".repeat(63))).collect();
    // 8 × (64 + 1) + 7 = 527 bytes of names, `=` and `&`; 253 × "é" (6 bytes encoded) + "aaa"
    let value = format!("{}aaa", "é".repeat(253));
    assert_eq!(527 + 6 * 253 + 3, 2048);
    let item = "😀".repeat(64);
    assert_eq!(item.len(), 256);
    let dims = |v: &str| {
        let mut pairs = vec![format!("\"{}\":\"{v}\"", names[0])];
        pairs.extend(names[1..].iter().map(|n| format!("\"{n}\":\"\"")));
        format!("{{{}}}", pairs.join(","))
    };
    let event = |ts: i64, v: &str| format!("{{\"item_id\":\"{item}\",\"ts\":{ts},\"dims\":{}}}\n", dims(v));
    let huge_ts = "x".repeat((1 << 20) - 40);
    let bad = format!("{{\"item_id\":\"a\",\"ts\":\"{huge_ts}\"}}\n");
    assert!(bad.len() <= 1 << 20);
    let lines = [
        event(1000, &value),
        event(2000, &value),
        bad,
        event(3000, &format!("{value}a")),
    ]
    .concat();
    std::fs::write(input.join("in.jsonl"), lines).expect("input");
    let by: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    let config = format!(
        "[job]\nid = \"{job}\"\n[source]\nkind = \"file\"\npath = \"{}/in.jsonl\"\n\
         [source.format]\nmax_dim_bytes = 2048\nmax_group_key_bytes = 2048\n\
         [[window]]\nname = \"{window}\"\nsize = \"1m\"\nk = 10\nby = [{}]\n\
         [hot_keys]\nthreshold = 0.01\nwindow = \"10s\"\n\
         [sink]\nkind = \"postgres\"\nurl = \"{}\"\nschema = \"{}\"\n",
        input.display(),
        by.join(", "),
        pg.url,
        pg.name
    );
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let out = hotlist_tests::run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        true,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("4 records, 2 events") && stdout.contains(" 2 bad,"),
        "{stdout}"
    );
    let mut c = pg.client();
    let rows: Vec<(String, String, String, i64)> = c
        .query("SELECT job, window_name, group_key, count FROM topk", &[])
        .expect("lists")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let (j, w, key, count) = &rows[0];
    assert_eq!((j, w, key.len(), *count), (&job, &window, 2048, 2));
    let hot: Vec<String> = c
        .query("SELECT item_id FROM hot_keys", &[])
        .expect("hot keys")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(hot, vec![item]);
    let dead: Vec<(String, i64, usize, usize, String)> = c
        .query(
            "SELECT source, position, length(detail), length(raw), detail FROM dead_letters ORDER BY position",
            &[],
        )
        .expect("dead letters")
        .iter()
        .map(|r| {
            let (detail_len, raw_len): (i32, i32) = (r.get(2), r.get(3));
            (r.get(0), r.get(1), detail_len as usize, raw_len as usize, r.get(4))
        })
        .collect();
    assert_eq!(
        dead.len(),
        2,
        "{:?}",
        dead.iter().map(|d| (d.1, d.2)).collect::<Vec<_>>()
    );
    assert!(
        dead[0].0.len() > 3_600 && dead[0].0.starts_with("file:"),
        "{}",
        dead[0].0.len()
    );
    assert_eq!(dead[0].1, 3);
    assert!(
        dead[0].2 > (1 << 20) - 100 && dead[0].3 > (1 << 20) - 100,
        "{:?}",
        (dead[0].2, dead[0].3)
    );
    assert_eq!(dead[1].1, 4);
    assert!(
        dead[1].4.starts_with(&format!(
            "group key of window \"{window}\" would be 2049 bytes (at most 2048"
        )),
        "{}",
        dead[1].4
    );
}
