//! A file of several MiB on the built binary: read ahead on a helper thread (1 worker, where
//! the machine has a core to spare) and on the workers (2 workers), chunks of 1 MiB, lines
//! across every chunk's end, too-large lines among them: the model's lists and dead letters
//! either way.

use hotlist_tests::model::{self, ModelWindow};

/// 150,000 lines (~5.4 MB: five chunks and more), in time order with some jitter, a bad line
/// every 997th and a line past `source.max_record_bytes` every 1,499th.
fn input() -> (Vec<Vec<u8>>, Vec<u8>) {
    let lines: Vec<Vec<u8>> = (0u64..150_000)
        .map(|i| match i {
            _ if i % 997 == 5 => b"{\"item_id\":".to_vec(),
            _ if i % 1499 == 11 => format!("{{\"item_id\":\"{}\",\"ts\":{}}}", "x".repeat(300), i * 5).into_bytes(),
            _ => {
                let ts = (i * 5).saturating_sub((i * 7919) % 11 * 20);
                format!("{{\"item_id\":\"item-{}\",\"ts\":{ts}}}", (i * i) % 211).into_bytes()
            }
        })
        .collect();
    let mut text = lines.join(&b'\n');
    text.push(b'\n');
    (lines, text)
}

#[test]
fn a_file_of_several_chunks_seals_the_models_lists_read_ahead_or_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (lines, text) = input();
    assert!(text.len() > 4 << 20, "{} bytes", text.len());
    std::fs::write(dir.path().join("big.jsonl"), &text).expect("input");
    let windows = [
        ModelWindow::new("1s", 1000, 1000, 5),
        ModelWindow::new("10s", 10_000, 5000, 4),
    ];
    let (want_lists, mut want_dead) = model::run(std::slice::from_ref(&lines), &windows, 200, 100);
    // (the model knows no record size: its id past 256 bytes is bad there, too large here)
    for d in &mut want_dead {
        if lines[d.1 as usize - 1].len() > 200 {
            d.2 = "too_large".to_string();
        }
    }
    assert!(
        want_dead.iter().any(|d| d.2 == "too_large"),
        "the input has too-large lines"
    );
    assert!(want_dead.iter().any(|d| d.2 == "bad"), "and bad ones");
    for workers in ["1", "2"] {
        let job = format!("ahead-{workers}w");
        let config = format!(
            "[job]\nid = \"{job}\"\n[source]\nkind = \"file\"\npath = \"big.jsonl\"\nmax_record_bytes = 200\n\
             [time]\nmax_out_of_orderness = \"200ms\"\nallowed_lateness = \"100ms\"\n\
             [[window]]\nname = \"1s\"\nsize = \"1s\"\nk = 5\n\
             [[window]]\nname = \"10s\"\nsize = \"10s\"\nslide = \"5s\"\nk = 4\n\
             [sink]\npath = \"{job}.db\"\n"
        );
        std::fs::write(dir.path().join(format!("{job}.toml")), config).expect("config");
        let toml = format!("{job}.toml");
        let args = ["run", "--config", &toml, "--progress", "never", "--workers", workers];
        hotlist_tests::run_hotlist(dir.path(), &args, true);
        let db = dir.path().join(format!("{job}.db"));
        hotlist_tests::assert_sqlite_as_model(&db, &job, &want_lists, &want_dead);
    }
}
