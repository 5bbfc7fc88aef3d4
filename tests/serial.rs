//! Locks for what the tests of one binary share beyond their own files and ports. The tests of
//! a binary run on threads of one process, so two of them may use a shared service at once:
//! each test that uses the local PostgreSQL server holds [`postgres`] (many at once), and the
//! test that restarts that server holds [`postgres_alone`] (no other meanwhile). A test takes
//! its guard once, first thing, and keeps it to its end (its schema is dropped before it).

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

static POSTGRES: RwLock<()> = RwLock::new(());

/// Held while a test uses the local PostgreSQL server; other tests may use it too.
pub fn postgres() -> RwLockReadGuard<'static, ()> {
    // a test that failed holding the lock leaves nothing to repair: go on
    POSTGRES.read().unwrap_or_else(PoisonError::into_inner)
}

/// Held while a test restarts the local PostgreSQL server: no other test uses it meanwhile.
pub fn postgres_alone() -> RwLockWriteGuard<'static, ()> {
    POSTGRES.write().unwrap_or_else(PoisonError::into_inner)
}
