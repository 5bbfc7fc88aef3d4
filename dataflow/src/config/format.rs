//! `[source.format]`: where a producer's record keeps the item id, the time, the user and the
//! dims (JSON Pointers), checked once; [`InputFormat::compile`] makes the parser's
//! [`Format`] for the dims and the user the job's windows need.

use anyhow::{anyhow, bail, Result};
use hotlist_operators::counter::{job_dims, needs_user};
use hotlist_operators::format::{Computed, Format, Pointer, TsUnit, MAX_TARGETS};
use hotlist_operators::group::{DimBounds, DEFAULT_MAX_DIM_BYTES, DEFAULT_MAX_GROUP_KEY_BYTES, GROUP_KEY_LIMIT};
use hotlist_operators::udf::Use;
use hotlist_operators::window::WindowSpec;
use serde::Deserialize;
use std::collections::BTreeMap;

/// `[source.format]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFormat {
    /// Pointer to the item id (default `/item_id`), or a UDF use `{ udf = "f", args = [...] }`.
    pub item_id: Option<toml::Value>,
    /// Pointer to the event time (default `/ts`).
    pub ts: Option<String>,
    /// Unit of integer times: `s`, `ms` (default), `us`, `ns`.
    pub ts_unit: Option<String>,
    /// Pointer to the user (default: none).
    pub user: Option<String>,
    /// A pointer to an object of dims (default `/dims`), or a table `{ name = "/pointer" }`.
    pub dims: Option<toml::Value>,
    /// The longest dim value in bytes (default 256).
    pub max_dim_bytes: Option<i64>,
    /// The longest group key in bytes, percent-encoded (default 1024).
    pub max_group_key_bytes: Option<i64>,
    /// A UDF use that keeps a record when it gives `true` or a non-zero integer.
    pub filter: Option<toml::Value>,
}

/// A UDF use as written: `{ udf = "normalize_url", args = ["/url"] }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUse {
    udf: String,
    args: Vec<String>,
}

/// A UDF use: which UDF computes what, from which arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UseSpec {
    /// What it computes.
    pub use_: Use,
    /// The UDF's name.
    pub udf: String,
    /// Where its arguments are.
    pub args: Vec<Pointer>,
}

/// A UDF use of the compiled format: its arguments are `args` of [`Format::args`], and a dim's
/// index in [`Format::dims`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteSpec {
    /// What it computes.
    pub use_: Use,
    /// The UDF's name.
    pub udf: String,
    /// Its arguments in the format's.
    pub args: std::ops::Range<usize>,
    /// For a dim, its index.
    pub dim: usize,
}

/// `key = { udf = …, args = […] }` read as a use.
fn use_of(key: &str, use_: Use, v: &toml::Value) -> Result<UseSpec> {
    let raw: RawUse = v
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| anyhow!("source.format.{key}: {}", e.message()))?;
    let args = raw
        .args
        .iter()
        .enumerate()
        .map(|(i, p)| pointer(&format!("{key}.args[{i}]"), p))
        .collect::<Result<_>>()?;
    Ok(UseSpec {
        use_,
        udf: raw.udf,
        args,
    })
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
    /// What UDFs compute (`{ udf = …, args = […] }` for the item id, a dim, the filter).
    pub uses: Vec<UseSpec>,
    /// The uses the compiled format runs (see [`InputFormat::compile`]).
    pub sites: Vec<SiteSpec>,
    /// `max_dim_bytes`.
    pub max_dim_bytes: usize,
    /// `max_group_key_bytes`.
    pub max_group_key_bytes: usize,
}

impl Default for InputFormat {
    /// The event contract.
    fn default() -> InputFormat {
        let raw = RawFormat::default();
        validate_format(&raw).expect("the default format is valid")
    }
}

/// A byte bound of the dims: 1 to [`GROUP_KEY_LIMIT`] (a larger group key could exceed
/// PostgreSQL's index row limit), or its default.
fn bound(key: &str, v: Option<i64>, default: usize) -> Result<usize> {
    match v.map(usize::try_from) {
        None => Ok(default),
        Some(Ok(n)) if (1..=GROUP_KEY_LIMIT).contains(&n) => Ok(n),
        Some(_) => bail!(
            "source.format.{key}: must be between 1 and {GROUP_KEY_LIMIT} (a longer group key could exceed PostgreSQL's index row limit), got {}",
            v.unwrap_or_default()
        ),
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
    let mut uses = Vec::new();
    let item_id = match &raw.item_id {
        None => pointer("item_id", "/item_id")?,
        Some(toml::Value::String(p)) => pointer("item_id", p)?,
        Some(v @ toml::Value::Table(_)) => {
            uses.push(use_of("item_id", Use::ItemId, v)?);
            pointer("item_id", "/item_id")?
        }
        Some(other) => {
            bail!("source.format.item_id: expected a JSON pointer or {{ udf = …, args = […] }}, got {other}")
        }
    };
    if let Some(f) = &raw.filter {
        uses.push(use_of("filter", Use::Filter, f)?);
    }
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
                if name.is_empty() {
                    bail!("source.format.dims: a dim name must not be empty");
                }
                if hotlist_operators::group::RESERVED_DIM_NAMES.contains(&name.as_str()) {
                    bail!(
                        "source.format.dims.{name}: {name:?} is a query parameter of the read API ({}); map the dim under another name",
                        hotlist_operators::group::RESERVED_DIM_NAMES.join(", ")
                    );
                }
                if let toml::Value::Table(_) = p {
                    uses.push(use_of(&format!("dims.{name}"), Use::Dim(name.clone()), p)?);
                    continue;
                }
                let toml::Value::String(p) = p else {
                    bail!("source.format.dims.{name}: expected a JSON pointer string or {{ udf = …, args = […] }}, got {p}");
                };
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
            user_is_extra: false,
            dims: Vec::new(),
            bounds: DimBounds::default(),
            args: Vec::new(),
            computed: Computed::default(),
        },
        uses,
        sites: Vec::new(),
        item_id,
        ts,
        ts_unit,
        user,
        dims,
        user_required: false,
        max_dim_bytes: bound("max_dim_bytes", raw.max_dim_bytes, DEFAULT_MAX_DIM_BYTES)?,
        max_group_key_bytes: bound(
            "max_group_key_bytes",
            raw.max_group_key_bytes,
            DEFAULT_MAX_GROUP_KEY_BYTES,
        )?,
    };
    (input.format, input.sites) = input.compile(&[], false)?;
    Ok(input)
}

impl InputFormat {
    /// The parser's format for `windows`: the dims of their `by` and a user if one counts
    /// distinct users ([`InputFormat::compile`]), with the bounds of the dims' values and of
    /// each window's group key.
    pub fn compile_for(&self, windows: &[WindowSpec]) -> Result<(Format, Vec<SiteSpec>)> {
        let (mut format, sites) = self.compile(&job_dims(windows), needs_user(windows))?;
        let names: Vec<String> = format.dims.iter().map(|(n, _)| n.clone()).collect();
        format.bounds = DimBounds::new(
            self.max_dim_bytes,
            self.max_group_key_bytes,
            &names,
            windows.iter().map(|w| (w.name.as_str(), &w.key.by[..])),
        );
        Ok((format, sites))
    }

    /// The parser's format for the dims the job needs (the union of the windows' `by`) and
    /// whether it needs a user (a window counts `distinct_users`). A dim missing from a
    /// `dims` table, or a user needed without `source.format.user`, is a config error. The
    /// UDF uses that run: the filter, a computed item id, and the computed dims needed.
    pub fn compile(&self, dims: &[String], needs_user: bool) -> Result<(Format, Vec<SiteSpec>)> {
        let udf_dim = |name: &str| self.uses.iter().find(|u| u.use_ == Use::Dim(name.to_string()));
        let mut sites = Vec::new();
        let mut args: Vec<Pointer> = Vec::new();
        let mut computed = Computed::default();
        let mut site = |u: &UseSpec, dim: usize, args: &mut Vec<Pointer>| {
            sites.push(SiteSpec {
                use_: u.use_.clone(),
                udf: u.udf.clone(),
                args: args.len()..args.len() + u.args.len(),
                dim,
            });
            args.extend(u.args.iter().cloned());
        };
        for u in self.uses.iter().filter(|u| !matches!(u.use_, Use::Dim(_))) {
            computed.item_id |= u.use_ == Use::ItemId;
            site(u, 0, &mut args);
        }
        for (i, name) in dims.iter().enumerate() {
            if let Some(u) = udf_dim(name) {
                computed.dims |= 1 << i;
                site(u, i, &mut args);
            }
        }
        if dims.len() + args.len() > MAX_TARGETS - 3 {
            bail!(
                "the windows' by name {} dims and the UDFs take {} arguments, at most {} together are supported",
                dims.len(),
                args.len(),
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
                    _ if udf_dim(name).is_some() => Pointer::parse("").map_err(|e| anyhow!("{e}"))?,
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
        let format = Format {
            item_id: self.item_id.clone(),
            ts: self.ts.clone(),
            ts_unit: self.ts_unit,
            user,
            user_is_extra: false,
            dims,
            bounds: DimBounds::default(),
            args,
            computed,
        };
        Ok((format, sites))
    }
}
