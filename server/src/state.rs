//! What every handler shares: the state (`AppState`) and the lookup of the window a request
//! names.

use crate::cache::{Cache, Snapshot};
use crate::error::ApiError;
use crate::history::HistoryWorker;
use crate::lookup_cache::LookupCache;
use crate::metrics::ApiMetrics;
use hotlist_sinks::StoredWindow;
use std::sync::Arc;
use std::time::Duration;

/// Shared state of the handlers.
pub struct AppState {
    /// The job whose lists are served.
    pub job: String,
    /// The snapshot cache.
    pub cache: Arc<Cache>,
    /// History lookups (`date`, `at`), answered on their own thread.
    pub history: HistoryWorker,
    /// Per-group latest lists and group listings of the served epoch.
    pub lookups: LookupCache,
    /// `Cache-Control: max-age` for lists that may still change.
    pub max_age: Duration,
    /// A handler that takes longer answers 503.
    pub request_timeout: Duration,
    /// Metrics.
    pub metrics: Arc<ApiMetrics>,
}

/// The window named `window`, or a 404 listing the job's windows.
pub(crate) fn find_window<'a>(snapshot: &'a Snapshot, window: &str) -> Result<&'a StoredWindow, ApiError> {
    snapshot.windows.iter().find(|w| w.name == window).ok_or_else(|| {
        let names: Vec<&str> = snapshot.windows.iter().map(|w| w.name.as_str()).collect();
        ApiError::not_found(
            Some("window"),
            format!("unknown window {window:?}; windows: {}", names.join(", ")),
        )
    })
}
