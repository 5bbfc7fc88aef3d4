//! The terminal progress display while a job runs: a live dashboard (counters and each
//! window's latest committed list) on a terminal, a status line every 5 s otherwise; and the
//! list rendering `hotlist run` also prints at the end.

use crate::config::JobPlan;
use crate::stats::JobStats;
use hotlist_operators::message::PublishedList;
use std::io::{IsTerminal, Write};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to show progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Progress {
    /// A live dashboard on a terminal, a status line every 5 s otherwise.
    Auto,
    /// Always the live dashboard.
    Always,
    /// Nothing while running (the summary is still printed by the CLI).
    Never,
}

/// The progress display thread.
pub struct Display {
    stop: Option<crossbeam_channel::Sender<()>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Display {
    /// Stops the display thread and waits for it.
    pub fn stop(mut self) {
        self.stop.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Starts the display `progress` asks for (none for `Never`).
pub fn spawn_display(plan: &JobPlan, progress: Progress, stats: Arc<JobStats>) -> Display {
    let tty = std::io::stdout().is_terminal();
    let (dashboard, every) = match progress {
        Progress::Never => {
            return Display {
                stop: None,
                handle: None,
            }
        }
        Progress::Always => (true, Duration::from_secs(1)),
        Progress::Auto if tty => (true, Duration::from_secs(1)),
        Progress::Auto => (false, Duration::from_secs(5)),
    };
    let (tx, rx) = crossbeam_channel::bounded::<()>(0);
    let title = format!("hotlist · job {} · {} worker(s)", plan.job_id, plan.workers);
    let windows: Vec<String> = plan.windows.iter().map(|w| w.spec.name.clone()).collect();
    let handle = std::thread::spawn(move || {
        let mut last = (Instant::now(), 0u64);
        loop {
            match rx.recv_timeout(every) {
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                _ => return,
            }
            let events = stats.source.events_in.load(Relaxed);
            let rate = (events - last.1) as f64 / last.0.elapsed().as_secs_f64().max(1e-3);
            last = (Instant::now(), events);
            let line = status_line(&stats, rate);
            if dashboard {
                let mut out = String::new();
                out.push_str("\x1b[H\x1b[2J");
                out.push_str(&format!("{title}   (Ctrl-C stops after committing)\n{line}\n"));
                out.push_str(&render_lists(&stats, &windows, 5));
                let mut so = std::io::stdout().lock();
                let _ = so.write_all(out.as_bytes());
                let _ = so.flush();
            } else {
                eprintln!("{line}");
            }
        }
    });
    Display {
        stop: Some(tx),
        handle: Some(handle),
    }
}

/// One line of counters.
pub fn status_line(stats: &JobStats, rate: f64) -> String {
    format!(
        "events {} ({:.0}/s) · bad {} · blank {} · late {} (dropped {}) · sealed {} · watermark {} · closed {} · sealed windows {} · revisions {} · commits {} · {} counters, {:.1} MB",
        stats.source.events_in.load(Relaxed),
        rate,
        stats.source.bad.load(Relaxed),
        stats.source.blank.load(Relaxed),
        stats.source.late.load(Relaxed),
        stats.source.late_dropped.load(Relaxed),
        stats.counting.sealed_dropped.load(Relaxed),
        stats.merge.watermark(),
        stats.merge.windows_closed.load(Relaxed),
        stats.merge.windows_sealed.load(Relaxed),
        stats.merge.revisions.load(Relaxed),
        stats.sink.commits.load(Relaxed),
        stats.counting.total_counters(),
        stats.counting.total_state_bytes() as f64 / 1e6,
    )
}

/// The latest committed list of each window (of a per-group window: its first groups), top
/// `n` rows.
pub fn render_lists(stats: &JobStats, windows: &[String], n: usize) -> String {
    /// Groups shown per per-group window (`hotlist query --group` shows any).
    const GROUPS_SHOWN: usize = 5;
    // Only what is shown is copied out of the map (it holds every live group's list).
    let shown: Vec<(Vec<PublishedList>, usize)> = match stats.sink.latest.lock() {
        Ok(latest) => windows
            .iter()
            .map(|w| {
                let lists = latest.iter().filter(|((lw, _), _)| lw == w).map(|(_, l)| l);
                (lists.clone().take(GROUPS_SHOWN).cloned().collect(), lists.count())
            })
            .collect(),
        Err(_) => return String::new(),
    };
    let mut out = String::new();
    for (w, (lists, total)) in windows.iter().zip(shown) {
        if lists.is_empty() {
            out.push_str(&format!("\n{w}: no list yet\n"));
        }
        for l in &lists {
            let group = if l.group.is_global() {
                String::new()
            } else {
                format!(" group {}", l.group)
            };
            out.push_str(&format!(
                "\n{w}{group} [{} .. {}) revision {} {}\n",
                l.start,
                l.end,
                l.revision,
                l.state.as_str()
            ));
            for (i, r) in l.items.iter().take(n).enumerate() {
                out.push_str(&format!("  {:>3}  {:<32} {:>12}\n", i + 1, r.item_id, r.count));
            }
        }
        if total > GROUPS_SHOWN {
            out.push_str(&format!(
                "  … and {} more groups (hotlist query --window {w} --group dim=value)\n",
                total - GROUPS_SHOWN
            ));
        }
    }
    out
}
