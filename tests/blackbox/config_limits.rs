//! Configurations the job cannot serve are refused at start with one line naming the key: a
//! dim named like a query parameter of the read API, a `run.batch_size` too large to allocate.

use std::path::Path;

const CONFIG: &str = "[job]\nid = \"t\"\n[source]\nkind = \"file\"\npath = \"in/*.jsonl\"\n\
    [[window]]\nname = \"1m\"\nsize = \"1m\"\nk = 10\n[sink]\npath = \"out.db\"\n";

/// Runs the job with `set` and returns its one stderr line; it must exit with 1 and write no
/// store.
fn refused(dir: &Path, config: &str, set: &[&str]) -> String {
    std::fs::write(dir.join("job.toml"), config).unwrap();
    let mut args = vec!["run", "--config", "job.toml", "--progress", "never"];
    for s in set {
        args.extend(["--set", s]);
    }
    let out = hotlist_tests::run_hotlist(dir, &args, false);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{set:?}: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{set:?}: one line, got {stderr}");
    assert!(!dir.join("out.db").exists(), "{set:?}: a store was written");
    lines[0].to_string()
}

fn input_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("in")).unwrap();
    std::fs::write(dir.path().join("in/a.jsonl"), "{\"item_id\":\"a\",\"ts\":1}\n").unwrap();
    dir
}

/// A dim named `k`, `date`, `at`, `window` or `group` could never be selected through
/// `/v1/top?…&dim=value` (the API reads those as its own parameters): `by` refuses it, and so
/// does a `[source.format] dims` mapping of that name.
#[test]
fn dims_named_like_query_parameters_are_refused() {
    let dir = input_dir();
    for name in ["k", "date", "at", "window", "group"] {
        let config = CONFIG.replace("k = 10\n", &format!("k = 10\nby = [\"country\", \"{name}\"]\n"));
        let line = refused(dir.path(), &config, &[]);
        assert!(
            line.starts_with(&format!(
                "error: config job.toml: window \"1m\": by: dim name \"{name}\" is a query parameter of the read API"
            )),
            "{name}: {line}"
        );
        let mapped = format!("{CONFIG}[source.format]\ndims = {{ {name} = \"/x\" }}\n");
        let line = refused(dir.path(), &mapped, &[]);
        assert!(
            line.contains(&format!("source.format.dims.{name}: \"{name}\" is a query parameter")),
            "{name}: {line}"
        );
    }
}

/// `run.batch_size` above 2^20 aborted on allocation (`memory allocation of … failed`, SIGABRT);
/// now it is one line naming the key and the bound.
#[test]
fn a_huge_batch_size_is_refused() {
    let dir = input_dir();
    for huge in ["1048577", "1000000000000"] {
        let line = refused(dir.path(), CONFIG, &[&format!("run.batch_size={huge}")]);
        assert_eq!(
            line,
            format!("error: config job.toml: run.batch_size: must be between 1 and 1048576, got {huge}")
        );
    }
}
