//! A model, not the counter: what a per-group window's counting costs in two layouts of its
//! keys, against the global window's, on the matrix's stream (Zipf 1.1 over 1 M items, 50
//! countries skewed as `scripts/bench` draws them, 600 k events a minute, 1m panes).
//!
//! - `global`: one record per item, its count in it;
//! - `keyed`: one record per (country, item) key (`country=C12 NUL item-1`, 26 bytes of key in
//!   the record), its count in it: the layout of a `by` window's keys in the counter today;
//! - `two-level`: one record per item, its countries' counts in it (two inline, more on the
//!   heap, found by a scan), found by the item's hash;
//! - `dense`: the same, but an item past four countries keeps its counts in an array by
//!   country (its look-up an index).
//!
//! The per-item layouts number a country from its text first, in a small map keyed by its bytes,
//! as a counter would number a shape's groups.
//!
//! Every layout is the same small table (`hashbrown`'s, indices into a `Vec` of records, as
//! the interner's), so only the layout differs. With two live panes (the default
//! `allowed_lateness` of 1m: a pane seals when the one after the next starts), a record's
//! counts of the older pane move to that pane's map when the newer pane counts it, as the
//! counter's inline counts do; `ONE_LIVE=1` keeps one pane live. A pane's records are freed
//! when it seals. Only counting is modelled: no source, lists or group notes.
//!
//! `cargo run --release -p hotlist-operators --example keyed_layouts [EVENTS]`

use hashbrown::HashTable;
use hotlist_operators::hash::item_hash;
use hotlist_operators::short_copy::le_word;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::time::Instant;

#[path = "../benches/common/stream.rs"]
mod stream;
use stream::{Rng, Zipf};

const ITEMS: usize = 1_000_000;
const PER_MINUTE: usize = 600_000;

/// (item rank, country) per event, in time order.
fn events(n: usize) -> Vec<(u32, u8)> {
    let zipf = Zipf::new(ITEMS, 1.1);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|_| {
            let rank = zipf.rank(&mut rng) as u32;
            let r = rng.unit();
            (rank, (50.0 * r * r) as u8)
        })
        .collect()
}

/// A record: its key (`W` bytes at most), the minute of its newest counts, and the counts.
#[derive(Clone)]
struct Rec<const W: usize, C> {
    key: [u8; W],
    len: u8,
    minute: i32,
    counts: C,
}

/// The table of one layout: records found by hash and key, freed when no live pane has them.
struct Table<const W: usize, C> {
    table: HashTable<u32>,
    recs: Vec<Rec<W, C>>,
    free: Vec<u32>,
    /// Per live minute, the counts moved out of records: (record, country) → count.
    moved: FxHashMap<i32, FxHashMap<(u32, u8), u32>>,
    live: i32,
}

impl<const W: usize, C: Default + Clone> Table<W, C> {
    fn new(live: i32) -> Self {
        Table {
            table: HashTable::new(),
            recs: Vec::new(),
            free: Vec::new(),
            moved: FxHashMap::default(),
            live,
        }
    }

    /// Minute `m` starts: the records no live pane counted are freed.
    fn start(&mut self, m: i32) {
        let oldest = m - self.live + 1;
        self.moved.retain(|&k, _| k >= oldest);
        let (recs, free) = (&mut self.recs, &mut self.free);
        self.table.retain(|&mut i| {
            let keep = recs[i as usize].minute >= oldest;
            if !keep {
                recs[i as usize].len = 0;
                free.push(i);
            }
            keep
        });
    }

    /// The record of `key` (hash `h`), made with `minute = i32::MIN` if new.
    #[inline]
    fn find_or_add(&mut self, key: &[u8], h: u64) -> u32 {
        let recs = &self.recs;
        if let Some(&i) = self
            .table
            .find(h, |&i| &recs[i as usize].key[..recs[i as usize].len as usize] == key)
        {
            return i;
        }
        let mut rec = Rec {
            key: [0; W],
            len: key.len() as u8,
            minute: i32::MIN,
            counts: C::default(),
        };
        rec.key[..key.len()].copy_from_slice(key);
        let i = match self.free.pop() {
            Some(i) => {
                self.recs[i as usize] = rec;
                i
            }
            None => {
                self.recs.push(rec);
                (self.recs.len() - 1) as u32
            }
        };
        let recs = &self.recs;
        self.table.insert_unique(h, i, |&j| {
            let r = &recs[j as usize];
            item_hash(std::str::from_utf8(&r.key[..r.len as usize]).unwrap_or(""))
        });
        i
    }
}

/// One record per key, its count in it (`global` with items as keys, `keyed` with keys).
fn one_level<const W: usize>(evs: &[(u32, u8)], live: i32, key: impl Fn(u32, u8, &mut String)) -> u64 {
    let mut t: Table<W, u32> = Table::new(live);
    let mut buf = String::new();
    let mut pairs = 0u64;
    for (e, &(rank, c)) in evs.iter().enumerate() {
        let m = (e / PER_MINUTE) as i32;
        if e % PER_MINUTE == 0 {
            t.start(m);
        }
        key(rank, c, &mut buf);
        let i = t.find_or_add(buf.as_bytes(), item_hash(&buf));
        let rec = &mut t.recs[i as usize];
        if rec.minute == m {
            rec.counts += 1;
            continue;
        }
        if rec.minute == m - 1 && live > 1 {
            t.moved.entry(m - 1).or_default().insert((i, 0), rec.counts);
        }
        rec.minute = m;
        rec.counts = 1;
        pairs += 1;
    }
    pairs
}

/// An item's countries' counts of its newest minute.
trait GroupCounts: Default + Clone {
    /// Adds one to country `c`'s count; whether it is its first.
    fn add(&mut self, c: u8) -> bool;
    /// Hands every (country, count) to `f`, then holds none.
    fn take_all(&mut self, f: impl FnMut(u8, u32));
}

/// A short list, found by a scan (past two, on the heap).
type Few = SmallVec<[(u8, u32); 2]>;

impl GroupCounts for Few {
    #[inline]
    fn add(&mut self, c: u8) -> bool {
        match self.iter().position(|g| g.0 == c) {
            Some(at) => {
                self[at].1 += 1;
                false
            }
            None => {
                self.push((c, 1));
                true
            }
        }
    }

    fn take_all(&mut self, mut f: impl FnMut(u8, u32)) {
        for &(g, n) in self.iter() {
            f(g, n);
        }
        self.clear();
    }
}

/// A few in a short list, many in an array by country (its look-up an index, not a scan of up
/// to 50 entries).
#[derive(Clone, Default)]
enum Dense {
    #[default]
    None,
    Few(Few),
    Many(Box<[u32; 64]>),
}

impl GroupCounts for Dense {
    #[inline]
    fn add(&mut self, c: u8) -> bool {
        match self {
            Dense::Many(d) => {
                d[c as usize] += 1;
                d[c as usize] == 1
            }
            Dense::Few(f) if f.len() < 4 || f.iter().any(|g| g.0 == c) => f.add(c),
            Dense::Few(f) => {
                let mut d = Box::new([0u32; 64]);
                for &(g, n) in f.iter() {
                    d[g as usize] = n;
                }
                d[c as usize] = 1;
                *self = Dense::Many(d);
                true
            }
            Dense::None => {
                *self = Dense::Few(SmallVec::from_elem((c, 1), 1));
                true
            }
        }
    }

    fn take_all(&mut self, mut f: impl FnMut(u8, u32)) {
        match self {
            Dense::Many(d) => {
                for (g, n) in d.iter_mut().enumerate() {
                    if *n > 0 {
                        f(g as u8, *n);
                        *n = 0;
                    }
                }
            }
            Dense::Few(l) => l.take_all(f),
            Dense::None => {}
        }
    }
}

/// One record per item, its countries' counts of its newest minute in it (`C`). A country's
/// number is found from its text (`values[country]`, as an event holds it) in a small map.
fn two_level<C: GroupCounts>(evs: &[(u32, u8)], live: i32, items: &[String], values: &[String]) -> u64 {
    let mut t: Table<14, C> = Table::new(live);
    let mut numbers: FxHashMap<u128, u8> = FxHashMap::default();
    let mut pairs = 0u64;
    for (e, &(rank, country)) in evs.iter().enumerate() {
        let next = numbers.len() as u8;
        // (a value of up to 15 bytes as one number with its length: no call to compare bytes)
        let v = values[country as usize].as_bytes();
        let c = *numbers.entry(le_word(v) | (v.len() as u128) << 120).or_insert(next);
        let m = (e / PER_MINUTE) as i32;
        if e % PER_MINUTE == 0 {
            t.start(m);
        }
        let item = &items[rank as usize];
        let i = t.find_or_add(item.as_bytes(), item_hash(item));
        let rec = &mut t.recs[i as usize];
        if rec.minute != m {
            let keep = rec.minute == m - 1 && live > 1;
            let moved = t.moved.entry(m - 1).or_default();
            rec.counts.take_all(|g, n| {
                if keep {
                    moved.insert((i, g), n);
                }
            });
            rec.minute = m;
        }
        pairs += u64::from(rec.counts.add(c));
    }
    pairs
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(8_000_000);
    let live = if std::env::var_os("ONE_LIVE").is_some() { 1 } else { 2 };
    let evs = events(n);
    let items: Vec<String> = (0..ITEMS).map(|r| format!("item-{r}")).collect();
    let values: Vec<String> = (0..50).map(|c| format!("C{c}")).collect();
    let prefixes: Vec<String> = values.iter().map(|v| format!("country={v}\0")).collect();
    println!("{n} events, {live} live pane(s)");
    for round in 1..=5 {
        let t = Instant::now();
        let g = one_level::<14>(&evs, live, |r, _, b| {
            b.clear();
            b.push_str(&items[r as usize]);
        });
        let global = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let k = one_level::<26>(&evs, live, |r, c, b| {
            b.clear();
            b.push_str(&prefixes[c as usize]);
            b.push_str(&items[r as usize]);
        });
        let keyed = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let two = two_level::<Few>(&evs, live, &items, &values);
        let two_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let dense = two_level::<Dense>(&evs, live, &items, &values);
        let dense_s = t.elapsed().as_secs_f64();
        assert_eq!(k, two, "the layouts count the same (country, item, minute) keys");
        assert_eq!(k, dense, "the layouts count the same (country, item, minute) keys");
        let rate = |s: f64| n as f64 / s / 1e6;
        println!(
            "round {round}: global {:.2} M/s ({g} keys), keyed {:.2} M/s ({k}) {:.2}x of global, \
             two-level {:.2} M/s {:.2}x of global, {:.2}x of keyed; dense {:.2}x of global, {:.2}x of keyed",
            rate(global),
            rate(keyed),
            global / keyed,
            rate(two_s),
            global / two_s,
            keyed / two_s,
            global / dense_s,
            keyed / dense_s
        );
    }
}
