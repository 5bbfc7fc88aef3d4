//! `[source.format]`: where a producer's record keeps the item id, the time, the user and the
//! dims (JSON Pointers), checked once; [`InputFormat::compile`] makes the parser's
//! [`Format`] for the dims and the user the job's windows need.

use anyhow::{anyhow, bail, Result};
use hotlist_operators::format::{Format, Pointer, TsUnit, MAX_TARGETS};
use serde::Deserialize;
use std::collections::BTreeMap;

/// `[source.format]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFormat {
    /// Pointer to the item id (default `/item_id`).
    pub item_id: Option<String>,
    /// Pointer to the event time (default `/ts`).
    pub ts: Option<String>,
    /// Unit of integer times: `s`, `ms` (default), `us`, `ns`.
    pub ts_unit: Option<String>,
    /// Pointer to the user (default: none).
    pub user: Option<String>,
    /// A pointer to an object of dims (default `/dims`), or a table `{ name = "/pointer" }`.
    pub dims: Option<toml::Value>,
}

/// Where the dims are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DimsAt {
    /// In an object: dim `d` is at `<pointer>/d`.
    Object(Pointer),
    /// Each dim at its own pointer.
    Each(BTreeMap<String, Pointer>),
}

/// The validated `[source.format]`, and what the job's windows need of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputFormat {
    /// Pointer to the item id.
    pub item_id: Pointer,
    /// Pointer to the event time.
    pub ts: Pointer,
    /// Unit of integer times.
    pub ts_unit: TsUnit,
    /// Pointer to the user, if configured.
    pub user: Option<Pointer>,
    /// Where the dims are.
    pub dims: DimsAt,
    /// The parser's format for what the windows need (see [`InputFormat::compile`]).
    pub format: Format,
    /// Every window needs a user: a record without one is a bad record (otherwise it goes on
    /// with no user).
    pub user_required: bool,
}

impl Default for InputFormat {
    /// The event contract.
    fn default() -> InputFormat {
        let raw = RawFormat::default();
        validate_format(&raw).expect("the default format is valid")
    }
}

fn pointer(key: &str, text: &str) -> Result<Pointer> {
    let p = Pointer::parse(text).map_err(|e| anyhow!("source.format.{key}: {e}"))?;
    if p.tokens.is_empty() {
        bail!("source.format.{key}: must not be \"\" (the whole record is an object)");
    }
    Ok(p)
}

/// Checks `[source.format]`; the compiled format needs no dims and no user until
/// [`InputFormat::compile`] says otherwise.
pub fn validate_format(raw: &RawFormat) -> Result<InputFormat> {
    let item_id = pointer("item_id", raw.item_id.as_deref().unwrap_or("/item_id"))?;
    let ts = pointer("ts", raw.ts.as_deref().unwrap_or("/ts"))?;
    let ts_unit = match raw.ts_unit.as_deref() {
        None => TsUnit::Millis,
        Some(u) => TsUnit::parse(u)
            .ok_or_else(|| anyhow!("source.format.ts_unit: expected \"s\", \"ms\", \"us\" or \"ns\", got {u:?}"))?,
    };
    let user = raw.user.as_deref().map(|u| pointer("user", u)).transpose()?;
    let dims = match &raw.dims {
        None => DimsAt::Object(pointer("dims", "/dims")?),
        Some(toml::Value::String(p)) => DimsAt::Object(pointer("dims", p)?),
        Some(toml::Value::Table(t)) => {
            let mut each = BTreeMap::new();
            for (name, p) in t {
                let toml::Value::String(p) = p else {
                    bail!("source.format.dims.{name}: expected a JSON pointer string, got {p}");
                };
                if name.is_empty() {
                    bail!("source.format.dims: a dim name must not be empty");
                }
                each.insert(name.clone(), pointer(&format!("dims.{name}"), p)?);
            }
            DimsAt::Each(each)
        }
        Some(other) => bail!("source.format.dims: expected a JSON pointer or a table of them, got {other}"),
    };
    let mut input = InputFormat {
        format: Format {
            item_id: item_id.clone(),
            ts: ts.clone(),
            ts_unit,
            user: None,
            dims: Vec::new(),
        },
        item_id,
        ts,
        ts_unit,
        user,
        dims,
        user_required: false,
    };
    input.format = input.compile(&[], false)?;
    Ok(input)
}

impl InputFormat {
    /// The parser's format for the dims the job needs (the union of the windows' `by`) and
    /// whether it needs a user (a window counts `distinct_users`). A dim missing from a
    /// `dims` table, or a user needed without `source.format.user`, is a config error.
    pub fn compile(&self, dims: &[String], needs_user: bool) -> Result<Format> {
        if dims.len() > MAX_TARGETS - 3 {
            bail!(
                "the windows' by name {} dims, at most {} are supported",
                dims.len(),
                MAX_TARGETS - 3
            );
        }
        let user = match (&self.user, needs_user) {
            (Some(p), true) => Some(p.clone()),
            (None, true) => bail!("source.format.user: a window counts distinct_users, but no user pointer is set"),
            (_, false) => None,
        };
        let dims = dims
            .iter()
            .map(|name| {
                let p = match &self.dims {
                    DimsAt::Object(base) => {
                        let escaped = name.replace('~', "~0").replace('/', "~1");
                        Pointer::parse(&format!("{}/{escaped}", base.text)).map_err(|e| anyhow!("{e}"))?
                    }
                    DimsAt::Each(each) => each.get(name).cloned().ok_or_else(|| {
                        anyhow!("source.format.dims: no pointer for dim {name:?}, which a window's by names")
                    })?,
                };
                Ok((name.clone(), p))
            })
            .collect::<Result<_>>()?;
        Ok(Format {
            item_id: self.item_id.clone(),
            ts: self.ts.clone(),
            ts_unit: self.ts_unit,
            user,
            dims,
        })
    }
}
