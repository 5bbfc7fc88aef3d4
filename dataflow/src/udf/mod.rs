//! User-defined functions in Arroyo's plugin format (`[[udf]]`): a cdylib built with
//! `arroyo-udf-plugin` 0.2 and the `#[udf]` source it was built from (the library carries no
//! signature; it is read from the source, as Arroyo does).
//!
//! Files: `host` loads a library and calls its `__run` through the Arrow C Data Interface;
//! `columns` builds the argument columns and reads the result column; `batch` runs a batch of
//! parsed records through the job's UDFs (filter, item id, dims), isolating a record a UDF
//! fails on. The config side (`[[udf]]`, the `{ udf = …, args = […] }` fields) is
//! `config::udf`.
//!
//! UDFs are declared pure: a replay (`exact_at_seal`, `explain`, `verify`, a restore) calls
//! them again on the same records and must get the same results. A library whose file changed
//! since a checkpoint was written is refused at restore (its SHA-256 is in the manifest).

mod batch;
mod columns;
mod host;

pub use batch::{Outcome, Site, UdfRunner};
pub use host::Library;

use anyhow::{bail, Context, Result};
use arrow_data::ArrayData;
use hotlist_operators::udf::{Arg, Signature, Use};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A loaded UDF: its signature, library and the library's checksum.
pub struct LoadedUdf {
    /// The function's name (from its source).
    pub name: String,
    /// Its signature (from its source).
    pub signature: Signature,
    /// The library's path, as configured.
    pub path: PathBuf,
    /// The library file's SHA-256, in hex.
    pub sha256: String,
    lib: Library,
}

impl fmt::Debug for LoadedUdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedUdf")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("sha256", &self.sha256)
            .finish()
    }
}

impl LoadedUdf {
    /// Reads the signature from `source`, hashes and loads the library at `path`, and probes it
    /// once (a batch of one record whose arguments are all null) to check that what it returns
    /// is what its source declares.
    pub fn load(path: &Path, source: &Path) -> Result<LoadedUdf> {
        let text = std::fs::read_to_string(source).with_context(|| format!("cannot read {}", source.display()))?;
        let signature = Signature::from_source(&text).map_err(|e| anyhow::anyhow!("{}: {e}", source.display()))?;
        let named = |e: anyhow::Error| e.context(format!("udf {}", signature.name));
        let sha256 = file_sha256(path).map_err(named)?;
        let lib = Library::load(path).map_err(named)?;
        let udf = LoadedUdf {
            name: signature.name.clone(),
            signature,
            path: path.to_path_buf(),
            sha256,
            lib,
        };
        udf.probe()?;
        Ok(udf)
    }

    /// One call on one record of null arguments: a UDF whose arguments are not `Option`s is not
    /// even run (the plugin appends a null), so this checks the result type without running
    /// user code where it can. A UDF that fails on nulls is checked on its first batch instead.
    fn probe(&self) -> Result<()> {
        let args: Vec<ArrayData> = self
            .signature
            .args
            .iter()
            .map(|a| columns::column(a.scalar, &[Arg::Null]))
            .collect();
        if let Ok(data) = self.lib.call(&args)? {
            columns::Results::check(data, self.signature.ret.scalar, 1)
                .with_context(|| format!("{}: {}", self.name, self.path.display()))?;
        }
        Ok(())
    }

    /// Checks that this UDF fits `use_` with `arity` arguments.
    pub fn check_use(&self, use_: &Use, arity: usize) -> Result<()> {
        if let Err(e) = self.signature.check_use(use_, arity) {
            bail!("source.format.{use_}: {e}");
        }
        Ok(())
    }
}

/// The SHA-256 of a file, in hex.
pub fn file_sha256(path: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let digest = Sha256::digest(&bytes);
    Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// The job's UDFs, by name.
pub type Udfs = Vec<Arc<LoadedUdf>>;
