//! Hostile messages: oversized, and ahead of their message's timestamp.

use super::broker::Broker;
use super::harness::GENERATOR;
use hotlist_tests::run_hotlist;
use std::time::Duration;

/// Hostile messages, produced with explicit timestamps (2001-01-01 and 2100-01-01): a 2 MiB
/// message (above librdkafka's `fetch.message.max.bytes` and `source.max_record_bytes`, both
/// 1 MiB) is one `too_large` dead letter with its first 4 KiB and its true length; in a
/// batched message, an event 2 h ahead of its message's timestamp is `future`, whatever the
/// wall clock says; an event 74 years ahead of the wall clock but 30 min ahead of its
/// message's timestamp is counted. Everything else is counted; nothing is late.
#[test]
fn oversized_and_future_messages_are_dead_letters() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    std::fs::write(dir.path().join("gen.toml"), GENERATOR).expect("config");
    // create the topic (one partition) with one generated event at offset 0 (ts 0)
    run_hotlist(
        dir.path(),
        &[
            "produce",
            "--config",
            "gen.toml",
            "--brokers",
            &broker.addr(),
            "--topic",
            "hostile",
            "--create",
            "--set",
            "source.events=1",
            "--set",
            "source.partitions=1",
            "--set",
            "source.bad_fraction=0",
            "--set",
            "source.late_fraction=0",
        ],
        true,
    );
    let (t2001, t2100, hour) = (978_307_200_000i64, 4_102_444_800_000i64, 3_600_000i64);
    let event = |item: &str, ts: i64| format!("{{\"item_id\":\"{item}\",\"ts\":{ts}}}");
    let mut big = vec![b'x'; 2 << 20];
    big[..15].copy_from_slice(b"{\"item_id\":\"big");
    let batched = format!(
        "{}\n{}\n{}\n",
        event("a", t2001 + 1_000),
        event("a", t2001 + 2 * hour),
        event("a", t2001 + 2_000)
    );
    let messages: [(Vec<u8>, i64); 4] = [
        (event("a", t2001).into_bytes(), t2001),
        (big.clone(), t2001),
        (batched.into_bytes(), t2001),
        (event("z", t2100 + hour / 2).into_bytes(), t2100),
    ];
    let producer: BaseProducer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", broker.addr())
        .set("message.max.bytes", "10000000")
        .create()
        .expect("producer");
    for (payload, ts) in &messages {
        let rec = BaseRecord::<(), [u8]>::to("hostile")
            .partition(0)
            .payload(payload)
            .timestamp(*ts);
        producer.send(rec).map_err(|(e, _)| e).expect("send");
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
    let config = format!(
        "[job]\nid = \"kafka\"\n[source]\nkind = \"kafka\"\nbrokers = \"{}\"\ntopic = \"hostile\"\nbounded = true\n\
         [[window]]\nname = \"1d\"\nsize = \"1d\"\nk = 10\n[sink]\npath = \"out.db\"\n",
        broker.addr()
    );
    std::fs::write(dir.path().join("hotlist.toml"), config).expect("config");
    let out = run_hotlist(
        dir.path(),
        &["run", "--config", "hotlist.toml", "--progress", "never"],
        true,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("7 records, 5 events") && stdout.contains(" 2 bad, 0 late "),
        "{stdout}"
    );

    let conn = rusqlite::Connection::open(dir.path().join("out.db")).expect("open db");
    let mut stmt = conn
        .prepare("SELECT position, reason, detail, raw FROM dead_letters WHERE job = 'kafka' ORDER BY position")
        .expect("prepare");
    let dead: Vec<(i64, String, String, Vec<u8>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert_eq!((dead[0].0, dead[0].1.as_str()), (2, "too_large"));
    assert_eq!(
        dead[0].2,
        "message is 2097152 bytes, more than source.max_record_bytes (1048576); raw keeps its first 4096"
    );
    assert_eq!(dead[0].3, &big[..4096]);
    assert_eq!((dead[1].0, dead[1].1.as_str()), (3, "future"));
    assert_eq!(
        dead[1].2,
        "ts 2001-01-01T02:00:00.000Z is more than time.max_future (1h) ahead of the message timestamp \
         (2001-01-01T00:00:00.000Z) (line 2 of the message)"
    );
    let counts: Vec<(i64, String, i64)> = conn
        .prepare("SELECT window_start, item_id, count FROM topk WHERE job = 'kafka' ORDER BY window_start, rank")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    let in_2001: Vec<_> = counts
        .iter()
        .filter(|c| c.0 == t2001)
        .map(|c| (c.1.as_str(), c.2))
        .collect();
    let in_2100: Vec<_> = counts
        .iter()
        .filter(|c| c.0 == t2100)
        .map(|c| (c.1.as_str(), c.2))
        .collect();
    assert_eq!((in_2001, in_2100), (vec![("a", 3)], vec![("z", 1)]), "{counts:?}");
}
