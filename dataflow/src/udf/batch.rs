//! A batch of records through the job's UDFs: each record parsed (with its UDFs' arguments),
//! then per UDF use — the filter first, then the item id, then the dims — one call for the
//! whole batch, and finally each record's verdict.
//!
//! A call that fails (the UDF panicked on some record) is retried one record at a time, so
//! only the records it fails on are dead-lettered (`udf`, the detail naming the UDF); the
//! others go on. A result column of another type or length than declared is a broken
//! deployment (a library built from another source), not a bad record: the run fails.

use super::columns::{column, Out, Results};
use super::LoadedUdf;
use anyhow::{anyhow, Result};
use compact_str::ToCompactString;
use hotlist_operators::event::{check_item_id, BadRecord, ParsedEvent};
use hotlist_operators::format::{Cap, Parser};
use hotlist_operators::record::ItemId;
use hotlist_operators::udf::{arg_of, Arg, Use};
use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

/// One use of a UDF: what it computes, and where its arguments are.
#[derive(Debug)]
pub struct Site {
    /// What it computes.
    pub use_: Use,
    /// The UDF.
    pub udf: Arc<LoadedUdf>,
    /// Its arguments: these entries of [`Format::args`](hotlist_operators::format::Format).
    pub args: Range<usize>,
    /// For a dim, its index in the format's dims.
    pub dim: usize,
}

/// The job's UDF uses, in the order they run (filter, item id, dims).
#[derive(Debug, Default)]
pub struct UdfRunner {
    sites: Vec<Site>,
}

/// What a record became.
#[derive(Debug)]
pub enum Outcome<'a> {
    /// An event (its dims as the UDFs gave them, and the item id a UDF computed, if one did:
    /// then the parsed `item_id` is unused); not yet checked against the job's user rule (see
    /// `source::accept`).
    Event(ParsedEvent<'a>, Option<ItemId>),
    /// Not a valid event (blank lines included: [`BadRecord::Empty`]).
    Bad(BadRecord),
    /// Dropped by the filter: counted, not dead-lettered.
    Filtered,
    /// A UDF failed on it (the detail).
    Failed(String),
}

impl UdfRunner {
    /// The runner of `sites` (run filter first, then item id, then dims).
    pub fn new(mut sites: Vec<Site>) -> UdfRunner {
        sites.sort_by_key(|s| match s.use_ {
            Use::Filter => 0,
            Use::ItemId => 1,
            Use::Dim(_) => 2,
        });
        UdfRunner { sites }
    }

    /// Whether there is any UDF use.
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    /// The outcome of each of `lines`, in order. `Err`: a UDF gave a result that is not what
    /// its source declares (the run fails).
    pub fn run<'a>(&self, parser: &Parser, lines: &[&'a [u8]]) -> Result<Vec<Outcome<'a>>> {
        // every record's arguments in one buffer, `n` per record (no allocation per record)
        let n = parser.format().args.len();
        let mut caps: Vec<Cap<'a>> = Vec::with_capacity(lines.len() * n);
        let mut rows: Vec<Outcome<'a>> = lines
            .iter()
            .map(|line| match parser.parse_with_args(line, &mut caps) {
                Ok(ev) => Outcome::Event(ev, None),
                Err(bad) => {
                    caps.resize(caps.len() + n, Cap::Missing); // a bad line appends none
                    Outcome::Bad(bad)
                }
            })
            .collect();
        for site in &self.sites {
            self.run_site(site, parser, &mut rows, &caps[..], n)?;
        }
        if parser.format().computed.dims != 0 {
            let bounds = &parser.format().bounds;
            for row in &mut rows {
                if let Outcome::Event(ev, _) = row {
                    if let Err(bad) = bounds.check(&ev.dims) {
                        *row = Outcome::Bad(bad);
                    }
                }
            }
        }
        Ok(rows)
    }

    /// One use over the live rows: their arguments (`n` per row in `caps`), one call, the
    /// results into the rows.
    fn run_site<'a>(
        &self,
        site: &Site,
        parser: &Parser,
        rows: &mut [Outcome<'a>],
        caps: &[Cap<'a>],
        n: usize,
    ) -> Result<()> {
        let sig = &site.udf.signature;
        let mut live = Vec::new();
        let mut cols: Vec<Vec<Arg<'a>>> = vec![Vec::with_capacity(rows.len()); sig.args.len()];
        for (i, row) in rows.iter_mut().enumerate() {
            if !matches!(row, Outcome::Event(..)) {
                continue;
            }
            match push_args(site, parser, &caps[i * n..(i + 1) * n], &mut cols) {
                Ok(()) => live.push(i),
                Err(detail) => *row = Outcome::Bad(BadRecord::Invalid(detail)),
            }
        }
        if live.is_empty() {
            return Ok(());
        }
        let call = |cols: &[Vec<Arg<'a>>]| -> Result<Option<Results>> {
            let data: Vec<_> = sig.args.iter().zip(cols).map(|(t, c)| column(t.scalar, c)).collect();
            let rows = cols[0].len();
            match site.udf.lib.call(&data)? {
                Ok(out) => Results::check(out, sig.ret.scalar, rows)
                    .map(Some)
                    .map_err(|e| anyhow!("udf {} ({}): {e}", sig.name, site.udf.path.display())),
                Err(_) => Ok(None),
            }
        };
        if let Some(results) = call(&cols)? {
            for (k, &i) in live.iter().enumerate() {
                apply(site, &mut rows[i], results.get(k));
            }
            return Ok(());
        }
        // the batch failed: one record at a time finds the ones it fails on
        for (k, &i) in live.iter().enumerate() {
            let one: Vec<Vec<Arg<'a>>> = cols.iter().map(|c| vec![c[k].clone()]).collect();
            match call(&one)? {
                Some(results) => apply(site, &mut rows[i], results.get(0)),
                None => {
                    rows[i] = Outcome::Failed(format!(
                        "udf {} panicked or failed on this record (in {})",
                        sig.name, site.use_
                    ))
                }
            }
        }
        Ok(())
    }
}

/// A row's arguments for `site`, converted to the UDF's types and pushed onto `cols` (one per
/// argument), or the detail of a bad record (and nothing pushed).
fn push_args<'a>(site: &Site, parser: &Parser, caps: &[Cap<'a>], cols: &mut [Vec<Arg<'a>>]) -> Result<(), String> {
    let sig = &site.udf.signature;
    for (n, (a, t)) in site.args.clone().zip(&sig.args).enumerate() {
        match arg_of(&caps[a], t.scalar) {
            Ok(v) => cols[n].push(v),
            Err(found) => {
                for c in &mut cols[..n] {
                    c.pop();
                }
                let pointer = &parser.format().args[a].text;
                return Err(format!(
                    "{}: udf {} argument {n}: {pointer} is {found}, not {t}",
                    site.use_, sig.name
                ));
            }
        }
    }
    Ok(())
}

/// A UDF's result for one record, into its event (or its verdict).
fn apply(site: &Site, state: &mut Outcome<'_>, out: Out<'_>) {
    let Outcome::Event(ev, item) = state else { return };
    let name = &site.udf.signature.name;
    match &site.use_ {
        Use::Filter => {
            let keep = match out {
                Out::Bool(b) => b,
                Out::Int(i) => i != 0,
                Out::Str(_) | Out::Null => false,
            };
            if !keep {
                *state = Outcome::Filtered;
            }
        }
        Use::ItemId => {
            // inline up to 24 bytes: no allocation for the usual id
            let id: ItemId = match out {
                Out::Str(s) => s.into(),
                Out::Int(i) => i.to_compact_string(),
                Out::Bool(b) => b.to_compact_string(),
                Out::Null => {
                    *state = Outcome::Bad(BadRecord::Invalid(format!("item_id: udf {name} gave null")));
                    return;
                }
            };
            match check_item_id(&id) {
                Ok(()) => *item = Some(id),
                Err(bad) => *state = Outcome::Bad(BadRecord::Invalid(format!("udf {name}: {bad}"))),
            }
        }
        Use::Dim(_) => {
            ev.dims[site.dim] = match out {
                Out::Str(s) => Cow::Owned(s.to_string()),
                Out::Int(i) => Cow::Owned(i.to_string()),
                Out::Bool(b) => Cow::Owned(b.to_string()),
                Out::Null => Cow::Borrowed(""),
            }
        }
    }
}
