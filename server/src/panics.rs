//! Containing panics of store readers: a reader that panics on bad data must cost one failed
//! refresh, not the refresher thread (and with it every later refresh).
//!
//! [`contain`] runs a closure under `catch_unwind` and turns a panic into a message with its
//! location. While a closure runs under it, the process's panic hook does not print the usual
//! multi-line report for that thread; the caller logs one line instead. Panics anywhere else
//! keep the previous hook's report.
//!
//! Not contained: aborts. An allocation that fails (a reader trusting a count of 2^40 rows)
//! aborts the process; only readers that validate what they read prevent that.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::sync::Once;

thread_local! {
    /// Whether this thread is inside [`contain`].
    static CONTAINING: Cell<bool> = const { Cell::new(false) };
    /// The last contained panic's message and location, recorded by the hook.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Runs `f`; a panic in it becomes `Err("<message> at <file>:<line>")`. The caller must treat
/// whatever `f` was mutating as broken (the refresher drops its reader and opens a new one).
pub fn contain<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    HOOK.call_once(install_hook);
    let outer = CONTAINING.replace(true);
    let result = std::panic::catch_unwind(AssertUnwindSafe(f));
    CONTAINING.set(outer);
    result.map_err(|payload| {
        LAST_PANIC
            .take()
            .unwrap_or_else(|| payload_message(payload.as_ref()).to_string())
    })
}

fn install_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
        if CONTAINING.get() {
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            LAST_PANIC.set(Some(format!("{}{at}", payload_message(info.payload()))));
        } else {
            previous(info);
        }
    }));
}

fn payload_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message")
}

#[cfg(test)]
mod tests {
    use super::contain;

    /// A panic becomes an error naming its message and where it happened; values pass through.
    #[test]
    fn a_panic_becomes_an_error_with_its_location() {
        assert_eq!(contain(|| 7), Ok(7));
        let err = contain(|| -> u32 { panic!("bad row {}", 3) }).expect_err("panicked");
        assert!(err.starts_with("bad row 3 at "), "{err}");
        assert!(err.contains("panics.rs:"), "{err}");
        let nested = contain(|| contain(|| panic!("inner")).expect_err("inner panicked"));
        assert!(nested.is_ok_and(|m| m.starts_with("inner at ")));
    }
}
