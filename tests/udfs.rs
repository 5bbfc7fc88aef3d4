//! The example UDFs of `examples/udfs` (cdylibs built only against `arroyo-udf-plugin`, loaded
//! through Arroyo's plugin ABI), built by `scripts/build-udfs` once per test process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The directory holding the built `lib*.so` of every example UDF (`<repo>/target/udfs`):
/// runs `scripts/build-udfs` the first time it is called in this process (a no-op build when
/// its cached target dir is up to date); panics with the script's stderr if it fails.
pub fn udf_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = root();
        let dir = root.join("target/udfs");
        let out = Command::new("bash")
            .arg(root.join("scripts/build-udfs"))
            .arg(&dir)
            .current_dir(&root)
            .output()
            .expect("spawn bash scripts/build-udfs");
        assert!(
            out.status.success(),
            "scripts/build-udfs failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        dir.canonicalize().unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
    })
    .clone()
}

/// The built library of the example UDF `name` (`lib{name}.so` in [`udf_dir`]).
pub fn udf_lib(name: &str) -> PathBuf {
    let lib = udf_dir().join(format!("lib{name}.so"));
    assert!(
        lib.is_file(),
        "{} is missing: is `{name}` a member of examples/udfs?",
        lib.display()
    );
    lib
}

/// The source of the example UDF `name` (`examples/udfs/{name}/src/lib.rs`, absolute): the file
/// whose `#[udf]` function's signature gives the UDF's argument and return types.
pub fn udf_source(name: &str) -> PathBuf {
    let root = root().canonicalize().expect("repo root");
    root.join("examples/udfs").join(name).join("src/lib.rs")
}
