//! Snapshots: older format versions still read, the envelope round-trips with an unchanged
//! payload format, and lengths, headers and corruption are checked.

use super::*;
use crate::record::ItemId;
use crate::window::WindowId;

fn sample() -> CounterSnapshot {
    CounterSnapshot {
        windows: crate::window::default_windows(),
        allowed_lateness: Span::from_millis(60_000),
        watermark: Millis(123),
        key_groups: vec![KeyGroupState {
            key_group: 7,
            panes: vec![PaneCounts {
                width: Span::from_millis(60_000),
                start: Millis(-60_000),
                items: vec![("a".into(), 3), ("é".into(), u64::MAX)],
            }],
            exclusions: vec![InstanceCounts {
                instance: InstanceKey {
                    window: WindowId(1),
                    start: Millis(0),
                },
                items: vec![("a".into(), 1)],
            }],
        }],
        pane_files: vec!["pane-0000-60000--60000.snap".into()],
        sealed_until: vec![Millis(60_000), Millis::MIN, Millis::MIN, Millis::MIN],
        groups_seen: Vec::new(),
    }
}

// plain values in envelopes, for the tests of the envelope itself
impl Snapshot for u8 {}
impl Snapshot for Vec<u64> {}
impl Snapshot for String {}
impl Snapshot for Span {}

/// `bytes` with the envelope's version set to `version` (the checksum covers the payload only).
fn with_version(mut bytes: Vec<u8>, version: u16) -> Vec<u8> {
    bytes[6..8].copy_from_slice(&version.to_le_bytes());
    bytes
}

/// A counter snapshot of format 2 (no `sealed_until`) still reads, with none; other
/// snapshots read alike in both versions.
#[test]
fn format_2_still_reads() {
    #[derive(Serialize)]
    struct W3 {
        name: String,
        size: Span,
        slide: Span,
        k: usize,
    }
    #[derive(Serialize)]
    struct V2 {
        windows: Vec<W3>,
        allowed_lateness: Span,
        watermark: Millis,
        key_groups: Vec<KeyGroupState>,
        pane_files: Vec<String>,
    }
    let s = sample();
    let w3 = |w: &WindowSpec| W3 {
        name: w.name.clone(),
        size: w.size,
        slide: w.slide,
        k: w.k,
    };
    let v2 = V2 {
        windows: s.windows.iter().map(w3).collect(),
        allowed_lateness: s.allowed_lateness,
        watermark: s.watermark,
        key_groups: s.key_groups.clone(),
        pane_files: s.pane_files.clone(),
    };
    let read = decode::<CounterSnapshot>(&with_version(encode(&v2), 2)).expect("format 2 reads");
    assert_eq!(read.sealed_until, Vec::<Millis>::new());
    assert_eq!(read.key_groups, s.key_groups);
    assert_eq!(
        read.windows, s.windows,
        "format 2 windows are global windows counting events"
    );
    // format 3: windows without key shapes, merger states without groups
    #[derive(Serialize)]
    struct V3 {
        windows: Vec<W3>,
        allowed_lateness: Span,
        watermark: Millis,
        key_groups: Vec<KeyGroupState>,
        pane_files: Vec<String>,
        sealed_until: Vec<Millis>,
    }
    let v3 = V3 {
        windows: s.windows.iter().map(w3).collect(),
        allowed_lateness: s.allowed_lateness,
        watermark: s.watermark,
        key_groups: s.key_groups.clone(),
        pane_files: s.pane_files.clone(),
        sealed_until: vec![Millis(5)],
    };
    let read = decode::<CounterSnapshot>(&with_version(encode(&v3), 3)).expect("format 3 reads");
    assert_eq!((read.windows, read.sealed_until), (s.windows.clone(), vec![Millis(5)]));
    // formats 4 to 7: windows without rank
    #[derive(Serialize)]
    struct W7 {
        name: String,
        size: Span,
        slide: Span,
        k: usize,
        key: crate::group::KeyShape,
    }
    let w7 = |w: &WindowSpec| W7 {
        name: w.name.clone(),
        size: w.size,
        slide: w.slide,
        k: w.k,
        key: w.key.clone(),
    };
    // format 4: no groups_seen
    #[derive(Serialize)]
    struct V4 {
        windows: Vec<W7>,
        allowed_lateness: Span,
        watermark: Millis,
        key_groups: Vec<KeyGroupState>,
        pane_files: Vec<String>,
        sealed_until: Vec<Millis>,
    }
    let v4 = V4 {
        windows: s.windows.iter().map(w7).collect(),
        allowed_lateness: s.allowed_lateness,
        watermark: s.watermark,
        key_groups: s.key_groups.clone(),
        pane_files: s.pane_files.clone(),
        sealed_until: s.sealed_until.clone(),
    };
    let read = decode::<CounterSnapshot>(&with_version(encode(&v4), 4)).expect("format 4 reads");
    assert_eq!(
        read,
        CounterSnapshot {
            groups_seen: Vec::new(),
            ..s.clone()
        }
    );
    let instance = InstanceKey {
        window: crate::window::WindowId(0),
        start: Millis(0),
    };
    // format 7: the current layout but for the windows' rank
    #[derive(Serialize)]
    struct V7 {
        windows: Vec<W7>,
        allowed_lateness: Span,
        watermark: Millis,
        key_groups: Vec<KeyGroupState>,
        pane_files: Vec<String>,
        sealed_until: Vec<Millis>,
        groups_seen: Vec<(InstanceKey, Vec<u64>)>,
    }
    let v7 = V7 {
        windows: s.windows.iter().map(w7).collect(),
        allowed_lateness: s.allowed_lateness,
        watermark: s.watermark,
        key_groups: s.key_groups.clone(),
        pane_files: s.pane_files.clone(),
        sealed_until: s.sealed_until.clone(),
        groups_seen: s.groups_seen.clone(),
    };
    let read = decode::<CounterSnapshot>(&with_version(encode(&v7), 7)).expect("format 7 reads");
    assert_eq!(read, s);
    // merger states of formats 4 to 7: lists as (item, count) pairs
    type StateV7 = (InstanceKey, GroupKey, u32, Option<(ListState, Vec<(ItemId, u64)>)>);
    let listed = (ListState::Final, vec![(ItemId::from("a"), 3u64)]);
    let merger7: Vec<StateV7> = vec![(instance, GroupKey::global(), 4, Some(listed))];
    let read = decode::<MergerSnapshot>(&with_version(encode(&merger7), 7)).expect("format 7 reads");
    assert_eq!(
        read.instances[0].published,
        Some((ListState::Final, vec![RankedItem::counted("a", 3)]))
    );
    type StateV3 = (InstanceKey, u32, Option<(ListState, Vec<(ItemId, u64)>)>);
    let merger3: Vec<StateV3> = vec![(instance, 2, None)];
    let read = decode::<MergerSnapshot>(&with_version(encode(&merger3), 3)).expect("format 3 reads");
    assert_eq!(
        read.instances,
        vec![PublishedState {
            instance,
            group: GroupKey::global(),
            revision: 2,
            published: None
        }]
    );
    let src = SourceSnapshot::default();
    assert_eq!(decode::<SourceSnapshot>(&with_version(encode(&src), 2)), Ok(src));
    assert_eq!(
        decode::<CounterSnapshot>(&with_version(encode(&s), 1)),
        Err(SnapshotError::Version(1))
    );
}

#[test]
fn round_trip() {
    let s = sample();
    assert_eq!(decode::<CounterSnapshot>(&encode(&s)), Ok(s));
    let src = SourceSnapshot {
        partitions: vec![PartitionState {
            partition: PartitionId(2),
            position: 99,
            max_ts: Millis::MIN,
            status: PartitionStatus::Idle,
        }],
    };
    assert_eq!(decode::<SourceSnapshot>(&encode(&src)), Ok(src));
}

/// The payload is what bincode 1's `serialize` writes: snapshots of earlier builds still read.
#[test]
fn payload_format_is_unchanged() {
    let s = sample();
    assert_eq!(encode(&s)[HEADER..], bincode::serialize(&s).expect("serializes")[..]);
}

/// Sealed again with a valid checksum, a payload with a bad length or extra bytes is refused.
#[test]
fn lengths_are_bounded_by_the_payload() {
    let seal = |payload: &[u8]| {
        let mut out = encode(&0u8)[..8].to_vec();
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(payload).to_le_bytes());
        out.extend_from_slice(payload);
        out
    };
    // a Vec claiming 2^62 elements, then nothing
    let huge = seal(&(1u64 << 62).to_le_bytes());
    assert!(matches!(decode::<Vec<u64>>(&huge), Err(SnapshotError::Payload(_))));
    // a String claiming more bytes than there are
    let mut long = 1000u64.to_le_bytes().to_vec();
    long.extend_from_slice(b"abc");
    assert!(matches!(decode::<String>(&seal(&long)), Err(SnapshotError::Payload(_))));
    let mut extra = bincode::serialize(&sample()).expect("serializes");
    extra.push(0);
    assert!(matches!(
        decode::<CounterSnapshot>(&seal(&extra)),
        Err(SnapshotError::Payload(_))
    ));
    // a span beyond i64::MAX ms is not a span
    assert!(matches!(
        decode::<Span>(&seal(&u64::MAX.to_le_bytes())),
        Err(SnapshotError::Payload(_))
    ));
}

#[test]
fn the_header_tells_size_and_checksum_without_the_payload() {
    let bytes = encode(&sample());
    let h = read_header(&bytes[..HEADER_LEN]).unwrap();
    assert_eq!(h.file_len(), bytes.len() as u64);
    assert_eq!(h.checksum, xxhash_rust::xxh3::xxh3_64(&bytes[HEADER_LEN..]));
    assert_eq!(read_header(&bytes[..5]), Err(SnapshotError::Truncated(5)));
}

#[test]
fn corruption_is_detected() {
    let bytes = encode(&sample());
    for i in [HEADER, HEADER + 5, bytes.len() - 1] {
        let mut b = bytes.clone();
        b[i] ^= 0x40;
        assert_eq!(decode::<CounterSnapshot>(&b), Err(SnapshotError::Checksum), "byte {i}");
    }
    assert_eq!(
        decode::<CounterSnapshot>(&bytes[..bytes.len() - 3]),
        Err(SnapshotError::Truncated(bytes.len() - 3))
    );
    assert_eq!(
        decode::<CounterSnapshot>(&bytes[..10]),
        Err(SnapshotError::Truncated(10))
    );
    let mut b = bytes.clone();
    b[0] = b'X';
    assert_eq!(decode::<CounterSnapshot>(&b), Err(SnapshotError::BadMagic));
    let mut b = bytes;
    b[6] = 9;
    assert_eq!(decode::<CounterSnapshot>(&b), Err(SnapshotError::Version(9)));
}
