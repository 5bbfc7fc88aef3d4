//! `[[udf]]`: the job's user-defined functions (a cdylib built with `arroyo-udf-plugin` 0.2 and
//! the `#[udf]` source it was built from), loaded and probed once at start, and the uses of
//! `[source.format]` bound to them with their signatures checked. Every problem is one line
//! naming the UDF.

use super::format::{SiteSpec, UseSpec};
use crate::udf::{LoadedUdf, Site, UdfRunner, Udfs};
use anyhow::{anyhow, bail, Context, Result};
use hotlist_operators::udf::Use;
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::Arc;

/// `[[udf]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUdf {
    /// The library (`lib<name>.so`).
    pub path: Option<String>,
    /// Its `#[udf]` source file: the signature is read from it.
    pub source: Option<String>,
}

/// Loads every `[[udf]]` (in order); two with one function name are an error.
pub fn validate_udfs(raw: &[RawUdf]) -> Result<Udfs> {
    let mut udfs: Udfs = Vec::new();
    for (i, u) in raw.iter().enumerate() {
        let key = format!("udf[{i}]");
        let path = u
            .path
            .as_ref()
            .ok_or_else(|| anyhow!("{key}.path: missing (the UDF's library)"))?;
        let source = u
            .source
            .as_ref()
            .ok_or_else(|| anyhow!("{key}.source: missing (the UDF's #[udf] source, where its signature is read)"))?;
        let udf = LoadedUdf::load(&PathBuf::from(path), &PathBuf::from(source)).with_context(|| key.clone())?;
        if udfs.iter().any(|o| o.name == udf.name) {
            bail!("{key}: a UDF named {} is already configured", udf.name);
        }
        udfs.push(Arc::new(udf));
    }
    Ok(udfs)
}

/// The UDF named in `use_`, whose signature must fit it with `arity` arguments.
fn udf_for<'u>(udfs: &'u Udfs, name: &str, use_: &Use, arity: usize) -> Result<&'u Arc<LoadedUdf>> {
    let udf = udfs.iter().find(|u| u.name == name).ok_or_else(|| {
        let names: Vec<&str> = udfs.iter().map(|u| u.name.as_str()).collect();
        anyhow!(
            "source.format.{use_}: no [[udf]] is named {name:?} (configured: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )
    })?;
    udf.check_use(use_, arity)?;
    Ok(udf)
}

/// Checks every UDF use of `[source.format]` (those the windows need and the rest alike).
pub fn check_uses(uses: &[UseSpec], udfs: &Udfs) -> Result<()> {
    for u in uses {
        udf_for(udfs, &u.udf, &u.use_, u.args.len())?;
    }
    Ok(())
}

/// The runner of the compiled format's UDF uses, each bound to its UDF.
pub fn bind(sites: &[SiteSpec], udfs: &Udfs) -> Result<UdfRunner> {
    let mut bound = Vec::new();
    for s in sites {
        let udf = udf_for(udfs, &s.udf, &s.use_, s.args.len())?;
        bound.push(Site {
            use_: s.use_.clone(),
            udf: udf.clone(),
            args: s.args.clone(),
            dim: s.dim,
        });
    }
    Ok(UdfRunner::new(bound))
}

/// The job's UDFs and the runner of the uses its windows need (every use checked). (The
/// generator has no `[source.format]`, so no UDF use: its records have no fields to read.)
pub fn validate(raw: &[RawUdf], input: &super::InputFormat) -> Result<(Udfs, Arc<UdfRunner>)> {
    let udfs = validate_udfs(raw)?;
    check_uses(&input.uses, &udfs)?;
    let runner = bind(&input.sites, &udfs)?;
    Ok((udfs, Arc::new(runner)))
}
