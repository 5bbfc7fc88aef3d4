//! The generator as a partition reader, optionally paced to the wall clock.
//!
//! Unpaced, it produces as fast as the job consumes (benchmarks, tests). Paced, event `i` of a
//! partition is released when the wall clock has moved `i / rate` seconds since the reader
//! started, so event time advances like real time (the embedded default's live demo).

use super::{PartitionReader, ReadStatus, Record};
use crate::generator::{Generated, GeneratorSpec, GeneratorTables, PartitionStream};
use anyhow::{anyhow, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Reads one generator partition.
pub struct GeneratorReader {
    stream: PartitionStream,
    pace: Option<(Instant, u64)>,
    line: Vec<u8>,
}

/// Tables are large (an alias table over all items): build them once per process per spec.
pub fn shared_tables(spec: &GeneratorSpec) -> Result<Arc<GeneratorTables>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<GeneratorTables>>>> = OnceLock::new();
    let key = format!("{}:{}:{}", spec.seed, spec.items, spec.zipf);
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut cache = cache.lock().map_err(|_| anyhow!("generator table cache poisoned"))?;
    if let Some(t) = cache.get(&key) {
        return Ok(t.clone());
    }
    let t = Arc::new(GeneratorTables::new(spec).map_err(|e| anyhow!("generator: {e}"))?);
    cache.clear(); // keep at most one table set alive
    cache.insert(key, t.clone());
    Ok(t)
}

impl GeneratorReader {
    /// A reader for partition `p`.
    pub fn new(spec: &GeneratorSpec, p: u32, pace: bool) -> Result<GeneratorReader> {
        let tables = shared_tables(spec)?;
        Ok(GeneratorReader {
            stream: PartitionStream::new(spec, tables, p),
            pace: pace.then(|| (Instant::now(), spec.rate)),
            line: Vec::new(),
        })
    }

    /// Jumps to `position` (resuming from a checkpoint); pacing continues from there.
    pub fn skip_to(&mut self, position: u64) {
        self.stream.skip_to(position);
        if let Some((t0, rate)) = self.pace.as_mut() {
            let ahead = std::time::Duration::from_millis((position as u128 * 1000 / (*rate).max(1) as u128) as u64);
            *t0 = t0.checked_sub(ahead).unwrap_or(*t0);
        }
    }

    /// Produces up to `budget` records (fewer when paced).
    #[inline]
    pub fn read(&mut self, budget: usize, f: &mut impl FnMut(Record<'_>)) -> ReadStatus {
        let mut budget = budget;
        if let Some((t0, rate)) = self.pace {
            let due = (t0.elapsed().as_millis() * rate as u128 / 1000) as u64;
            let left = due.saturating_sub(self.stream.position());
            if left == 0 {
                return ReadStatus::Waiting;
            }
            budget = budget.min(left as usize);
        }
        for n in 0..budget {
            match self.stream.next() {
                Some(Generated::Event { item, ts }) => f(Record::Event(&item, ts)),
                Some(Generated::Bad { raw }) => {
                    self.line = raw;
                    f(Record::Line(&self.line));
                }
                None => return if n == 0 { ReadStatus::Ended } else { ReadStatus::Read(n) },
            }
        }
        ReadStatus::Read(budget)
    }
}

impl PartitionReader for GeneratorReader {
    #[inline]
    fn read(&mut self, budget: usize, f: &mut impl FnMut(Record<'_>)) -> ReadStatus {
        GeneratorReader::read(self, budget, f)
    }

    fn resume_at(&mut self, position: u64) -> anyhow::Result<u64> {
        self.skip_to(position);
        Ok(position)
    }
}
