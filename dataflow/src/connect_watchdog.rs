//! The cluster's connection set-up, bounded in time.
//!
//! timely connects a cluster's processes before any worker starts, and it waits for that without
//! a limit: a process retries connecting to the lower-indexed ones and accepts the higher-indexed
//! ones until every peer is there. A peer that was never started, or died before it connected,
//! would leave the others waiting silently for ever. The watchdog gives up instead: it exits the
//! process with one clear line once `run.connect_timeout` has passed without the cluster being
//! connected. Nothing has been read or committed by then, so exiting loses nothing.

use crate::config::ClusterPlan;
use std::sync::mpsc;

/// Dropping it (once timely's set-up returned, connected or not) stands the watchdog down.
pub struct ConnectWatchdog {
    _connected: mpsc::Sender<()>,
}

/// Starts the watchdog for this process of `cluster`.
pub fn start(cluster: &ClusterPlan) -> ConnectWatchdog {
    let (tx, rx) = mpsc::channel::<()>();
    let timeout = cluster.connect_timeout;
    let process = cluster.process;
    let peers: Vec<String> = cluster
        .addresses
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != process)
        .map(|(i, a)| format!("{i} at {a}"))
        .collect();
    let processes = cluster.addresses.len();
    let spawned = std::thread::Builder::new()
        .name("hotlist-connect-watchdog".into())
        .spawn(move || {
            // Only the timeout fires; a disconnect is the watchdog being stood down.
            if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(timeout.as_std()) {
                eprintln!(
                    "error: process {process} of {processes}: the cluster did not connect within {timeout} \
                     (run.connect_timeout); are all processes running? peers: {}",
                    peers.join(", ")
                );
                std::process::exit(1);
            }
        });
    if let Err(e) = spawned {
        // without it the process just waits as timely would: worth a warning, not a failure
        tracing::warn!("cannot start the connection watchdog: {e}");
    }
    ConnectWatchdog { _connected: tx }
}
