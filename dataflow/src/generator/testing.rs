//! Helpers shared by the generator's unit tests.

use super::{Generated, GeneratorSpec, GeneratorTables, PartitionStream};
use hotlist_operators::time::Millis;
use std::sync::Arc;

pub(super) fn spec(items: u32) -> GeneratorSpec {
    GeneratorSpec {
        items,
        ..GeneratorSpec::default()
    }
}

pub(super) fn stream(spec: &GeneratorSpec, partition: u32) -> PartitionStream {
    let tables = Arc::new(GeneratorTables::new(spec).expect("valid spec"));
    PartitionStream::try_new(spec, tables, partition).expect("valid partition")
}

pub(super) fn take(s: &mut PartitionStream, n: usize) -> Vec<Generated> {
    (0..n).map_while(|_| s.next()).collect()
}

pub(super) fn base_of(spec: &GeneratorSpec, i: u64) -> i64 {
    let q = u128::from(i) * 1000 / u128::from(spec.rate);
    i64::try_from(i128::from(spec.start.0) + q as i128).unwrap_or(i64::MAX)
}

pub(super) fn event_ts(g: &Generated) -> Millis {
    match g {
        Generated::Event { ts, .. } => *ts,
        Generated::Bad { .. } => panic!("unexpected bad record"),
    }
}
