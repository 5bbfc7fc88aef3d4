//! One UDF library, loaded once and called through Arroyo's plugin ABI (`arroyo-udf-plugin`
//! 0.2): the exported `extern "C-unwind" fn __run(FfiArrays) -> RunResult` takes one batch of
//! argument columns and gives the result column, as Arrow C Data Interface arrays.
//!
//! The `#[repr(C)]` types below are `arroyo-udf-common` 0.2's, field for field: the ABI is
//! their layout, and the C Data Interface structs inside are the same whatever `arrow`
//! version each side is built with.
//!
//! Ownership across the boundary, as Arroyo's host does it: the vector of argument arrays is
//! leaked to the plugin, which rebuilds it with `Vec::from_raw_parts` and frees it with *its*
//! global allocator; so hotlist must keep Rust's default allocator (the C `malloc`, which a
//! plugin built with default settings also uses). The arrays themselves are freed through
//! their release callbacks, by whoever made them. A panic inside the UDF is caught by the
//! plugin and comes back as `RunResult::Err`.

use anyhow::{anyhow, bail, Context, Result};
use arrow_array::ffi::{from_ffi, to_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_data::ArrayData;
use std::path::Path;

/// An argument or result array and its schema (`arroyo_udf_common::FfiArraySchema`).
#[repr(C)]
struct FfiArraySchema(FFI_ArrowArray, FFI_ArrowSchema);

/// The argument arrays of one call (`arroyo_udf_common::FfiArrays`): a leaked `Vec`.
#[repr(C)]
struct FfiArrays {
    ptr: *mut FfiArraySchema,
    len: usize,
    capacity: usize,
    error: bool,
}

/// What a call gives (`arroyo_udf_common::RunResult`).
#[repr(C)]
#[allow(dead_code)] // built by the plugin, matched here
enum RunResult {
    Ok(FfiArraySchema),
    Err,
}

type RunFn = unsafe extern "C-unwind" fn(FfiArrays) -> RunResult;

/// A loaded UDF library: its `__run`.
pub struct Library {
    run: RunFn,
}

/// A call that failed: the UDF panicked or reported an error for some record of the batch.
#[derive(Debug)]
pub struct CallFailed;

impl Library {
    /// Loads the library at `path` for good (it is never unloaded: a plugin's code may still
    /// be referenced by arrays it made) and finds its `__run`.
    pub fn load(path: &Path) -> Result<Library> {
        // SAFETY: loading runs the library's initialisers; a UDF library is trusted code the
        // operator configured, like any plugin.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(anyhow::Error::new)
            .with_context(|| format!("cannot load {}", path.display()))?;
        let lib: &'static libloading::Library = Box::leak(Box::new(lib));
        // SAFETY: `__run` has this signature in every arroyo-udf-plugin 0.2 library (the
        // `#[udf]` macro writes it); a library that is not one fails the start-up probe.
        let run = unsafe { lib.get::<RunFn>(b"__run") }.map_err(|_| {
            anyhow!(
                "{} exports no __run: not a UDF built with arroyo-udf-plugin's #[udf] (async UDFs are not supported)",
                path.display()
            )
        })?;
        Ok(Library { run: *run })
    }

    /// Calls the UDF on one batch: `args` are its argument columns (at least one, all of the
    /// same length, of the types its signature declares); the result column, unchecked.
    pub fn call(&self, args: &[ArrayData]) -> Result<std::result::Result<ArrayData, CallFailed>> {
        if args.is_empty() || args.iter().any(|a| a.len() != args[0].len()) {
            bail!("a UDF call needs one or more argument columns of one length");
        }
        let mut arrays = Vec::with_capacity(args.len());
        for a in args {
            let (array, schema) = to_ffi(a).context("exporting a UDF argument")?;
            arrays.push(FfiArraySchema(array, schema));
        }
        let mut arrays = std::mem::ManuallyDrop::new(arrays);
        let ffi = FfiArrays {
            ptr: arrays.as_mut_ptr(),
            len: arrays.len(),
            capacity: arrays.capacity(),
            error: false,
        };
        // SAFETY: the plugin takes ownership of the vector and its arrays (see the module doc).
        match unsafe { (self.run)(ffi) } {
            RunResult::Ok(FfiArraySchema(array, schema)) => {
                // SAFETY: a valid C Data Interface array and schema, moved to us.
                let data = unsafe { from_ffi(array, &schema) }.context("importing a UDF's result")?;
                Ok(Ok(data))
            }
            RunResult::Err => Ok(Err(CallFailed)),
        }
    }
}
