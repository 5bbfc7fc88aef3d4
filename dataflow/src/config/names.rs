//! Names that become paths and keys: `job.id` (checkpoint directories, S3 keys, Redis keys,
//! store rows) and window names (Redis keys, store rows). They are restricted to a safe alphabet
//! so that no name can leave `checkpoint.dir` (`..`, `/`, an absolute path), and two names can
//! never map to the same path or key (no separator, no case folding, no encoding).

use anyhow::{bail, Result};

/// The longest name accepted.
pub const MAX_NAME_LEN: usize = 128;

/// Checks that `name` (what the config calls `what`, e.g. `job.id`) is 1 to
/// [`MAX_NAME_LEN`] ASCII letters, digits, `-`, `_` or `.`, and does not start with `.`.
///
/// ```
/// use hotlist_dataflow::config::check_name;
/// assert!(check_name("job.id", "trending-v2.eu_1").is_ok());
/// for bad in ["", "..", "../x", "/abs", "a/b", "a:b", ".hidden", "a b", "é"] {
///     assert!(check_name("job.id", bad).is_err(), "{bad:?} must be refused");
/// }
/// ```
pub fn check_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        bail!("{what}: must be 1 to {MAX_NAME_LEN} characters, got {}", name.len());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        bail!("{what}: {name:?} has {c:?}; use only ASCII letters, digits, '-', '_' and '.' (it becomes a path and a key)");
    }
    if name.starts_with('.') {
        bail!("{what}: {name:?} starts with '.'; it becomes a path and a key");
    }
    Ok(())
}
