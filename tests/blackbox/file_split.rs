//! `source.split` on the binary: one file read as byte ranges, each its own partition, seals
//! the lists and dead letters a model of those ranges predicts, on 1 and 2 workers, read as
//! contiguous ranges or in stripes; a restore after the file changed size or the stripe changed
//! (its ranges would move) is refused with one line.

use hotlist_tests::model::{self, ModelWindow};

/// The lines of `text` cut as hotlist cuts a file into `n` ranges of `turns` stripes each, by an
/// independent rule: a line belongs to stripe `j` of `M = n·turns` when it starts in `[s(j),
/// s(j+1))`, `s(j)` being the first line start at or after byte `size·j/M` (lines start at 0
/// and after each `\n`), and stripe `j` to range `j % n`.
fn cut(text: &[u8], n: u64, turns: u64) -> Vec<Vec<Vec<u8>>> {
    let size = text.len() as u64;
    let m = n * turns;
    let starts: Vec<u64> = std::iter::once(0)
        .chain(
            text.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i as u64 + 1),
        )
        .collect();
    let first_at_or_after = |b: u64| starts.iter().copied().find(|&s| s >= b).unwrap_or(u64::MAX);
    let bounds: Vec<u64> = (0..=m)
        .map(|j| {
            if j == m {
                u64::MAX
            } else {
                first_at_or_after(size * j / m)
            }
        })
        .collect();
    let mut ranges = vec![Vec::new(); n as usize];
    let mut at = 0u64;
    for line in text.split(|b| *b == b'\n') {
        if at < size {
            let j = (0..m as usize)
                .find(|&j| bounds[j] <= at && at < bounds[j + 1])
                .expect("a stripe");
            ranges[j % n as usize].push(line.to_vec());
        }
        at += line.len() as u64 + 1;
    }
    ranges
}

/// The test file: 1,200 lines, a bad one every 89th.
fn input() -> (Vec<Vec<u8>>, Vec<u8>) {
    let lines: Vec<Vec<u8>> = (0u64..1200)
        .map(|i| {
            if i % 89 == 7 {
                return b"{\"item_id\":".to_vec(); // bad
            }
            // a step of 20 ms, jittered back by up to 600 ms: some events are late in their range
            let ts = (i * 20).saturating_sub((i * 7919) % 13 * 50);
            format!("{{\"item_id\":\"i{}\",\"ts\":{ts}}}", (i * i) % 29).into_bytes()
        })
        .collect();
    let mut text = lines.join(&b'\n');
    text.push(b'\n');
    (lines, text)
}

/// The job over `big.jsonl` in 3 ranges (`extra`: more `[source]` lines).
fn config(job: &str, extra: &str) -> String {
    format!(
        "[job]\nid = \"{job}\"\n[run]\nbatch_size = 16\n\
         [source]\nkind = \"file\"\npath = \"big.jsonl\"\nsplit = 3\n{extra}\
         [time]\nmax_out_of_orderness = \"200ms\"\nallowed_lateness = \"100ms\"\n\
         [[window]]\nname = \"1s\"\nsize = \"1s\"\nk = 5\n\
         [[window]]\nname = \"3s\"\nsize = \"3s\"\nslide = \"1s\"\nk = 4\n\
         [checkpoint]\ndir = \"checkpoints\"\n[sink]\npath = \"{job}.db\"\n"
    )
}

fn windows() -> [ModelWindow; 2] {
    [
        ModelWindow::new("1s", 1000, 1000, 5),
        ModelWindow::new("3s", 3000, 1000, 4),
    ]
}

/// Runs `job` (config `extra`) on 1 and 2 workers: the model's lists and dead letters of
/// `ranges`, each range named in its dead letters; a second run resumes at the ranges' ends.
fn runs_seal_the_models_lists(dir: &std::path::Path, ranges: &[Vec<Vec<u8>>], name: &str, extra: &str) {
    let (want_lists, want_dead) = model::run(ranges, &windows(), 200, 100);
    assert!(want_dead.iter().any(|d| d.0 == 2 && d.2 == "bad"), "{want_dead:?}");
    for workers in ["1", "2"] {
        let job = format!("{name}-{workers}w");
        let toml = format!("{job}.toml");
        std::fs::write(dir.join(&toml), config(&job, extra)).expect("write config");
        let args = ["run", "--config", &toml, "--progress", "never", "--workers", workers];
        hotlist_tests::run_hotlist(dir, &args, true);
        let db = dir.join(format!("{job}.db"));
        hotlist_tests::assert_sqlite_as_model(&db, &job, &want_lists, &want_dead);
        let conn = rusqlite::Connection::open(&db).expect("open db");
        let sources: Vec<String> = conn
            .prepare("SELECT DISTINCT source FROM dead_letters WHERE job = ?1 ORDER BY source")
            .and_then(|mut s| s.query_map([&job], |r| r.get(0))?.collect())
            .expect("sources");
        assert_eq!(
            sources,
            ["file:big.jsonl#1/3", "file:big.jsonl#2/3", "file:big.jsonl#3/3"],
            "dead letters name their range"
        );
        // run again on the same file: it restores its last checkpoint and has nothing to read
        let again = hotlist_tests::run_hotlist(dir, &args, true);
        let said = String::from_utf8_lossy(&again.stdout);
        assert!(
            said.contains(" 0 records"),
            "{job}: resumed at the ends of the ranges: {said}"
        );
        assert_eq!(
            hotlist_tests::sqlite_sealed_lists(&db, &job),
            want_lists,
            "{job}: rerun"
        );
    }
}

/// In stripes of 2 KiB (the file is ~37 KB: 7 stripes per range), each range reads its
/// stripes in turn; the same checkpoint with another stripe is refused, since its ranges'
/// lines would be others.
#[test]
fn a_file_read_in_stripes_seals_the_models_lists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, text) = input();
    std::fs::write(dir.path().join("big.jsonl"), &text).expect("write input");
    let turns = (text.len() as u64).div_ceil(3 * 2048);
    assert!(turns >= 5, "{turns} stripes per range");
    let ranges = cut(&text, 3, turns);
    assert!(ranges.iter().all(|r| r.len() > 300), "three real ranges");
    assert_ne!(ranges, cut(&text, 3, 1), "stripes are not contiguous ranges");
    runs_seal_the_models_lists(dir.path(), &ranges, "stripes", "split_stripe_bytes = 2048\n");
    std::fs::write(
        dir.path().join("stripes-1w.toml"),
        config("stripes-1w", "split_stripe_bytes = 4096\n"),
    )
    .expect("write config");
    let out = hotlist_tests::run_hotlist(
        dir.path(),
        &["run", "--config", "stripes-1w.toml", "--progress", "never"],
        false,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused: {stderr}");
    assert!(
        stderr.contains("ranges would move") && stderr.contains(&format!("[{turns}] stripes per range")),
        "one line saying why: {stderr}"
    );
}

#[test]
fn a_file_read_in_ranges_seals_the_models_lists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (lines, text) = input();
    std::fs::write(dir.path().join("big.jsonl"), &text).expect("write input");
    let ranges = cut(&text, 3, 1);
    assert!(ranges.iter().all(|r| r.len() > 300), "three real ranges");
    let (_, want_dead) = model::run(&ranges, &windows(), 200, 100);
    let (_, whole_dead) = model::run(std::slice::from_ref(&lines), &windows(), 200, 100);
    assert!(
        want_dead != whole_dead,
        "lateness is judged per partition: the ranges' late events are not the whole file's"
    );
    runs_seal_the_models_lists(dir.path(), &ranges, "split", "");
    // the same file in stripes would be other ranges: the contiguous ranges' checkpoint (as an
    // older hotlist wrote it: no stripes in its manifest) is refused, not misread
    std::fs::write(
        dir.path().join("split-2w.toml"),
        config("split-2w", "split_stripe_bytes = 2048\n"),
    )
    .expect("write config");
    let out = hotlist_tests::run_hotlist(
        dir.path(),
        &["run", "--config", "split-2w.toml", "--progress", "never"],
        false,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused: {stderr}");
    assert!(
        stderr.contains("ranges would move") && stderr.contains("one contiguous range per partition"),
        "one line saying why: {stderr}"
    );
    // the file grows: the ranges would be cut elsewhere, so the checkpoints cannot be resumed
    let mut grown = text.clone();
    grown.extend_from_slice(b"{\"item_id\":\"late-comer\",\"ts\":30000}\n");
    std::fs::write(dir.path().join("big.jsonl"), &grown).expect("append");
    let out = hotlist_tests::run_hotlist(
        dir.path(),
        &["run", "--config", "split-1w.toml", "--progress", "never"],
        false,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused: {stderr}");
    assert!(
        stderr.contains("big.jsonl was") && stderr.contains("ranges would move"),
        "one line saying why: {stderr}"
    );
    // and starting over reads the grown file in ranges cut from its new size
    hotlist_tests::run_hotlist(
        dir.path(),
        &[
            "run",
            "--config",
            "split-1w.toml",
            "--progress",
            "never",
            "--from-scratch",
        ],
        true,
    );
    let grown_lines: Vec<Vec<u8>> = grown
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    assert_eq!(grown_lines.len(), lines.len() + 1);
    let (grown_lists, _) = model::run(&cut(&grown, 3, 1), &windows(), 200, 100);
    assert_eq!(
        hotlist_tests::sqlite_sealed_lists(&dir.path().join("split-1w.db"), "split-1w"),
        grown_lists
    );
}
