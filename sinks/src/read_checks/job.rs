//! What every store checks in a job's records: its windows as stored (each `k` in range, the
//! whole set valid as the job's configuration) and its last commit.

use crate::types::StoredWindow;
use hotlist_operators::time::Millis;
use hotlist_operators::window::{validate_all, WindowSpec, MAX_K};

/// A window's `k` as stored: from 1 to [`MAX_K`].
pub(crate) fn window_k(job: &str, window: &str, k: i64) -> Result<usize, String> {
    usize::try_from(k)
        .ok()
        .filter(|k| (1..=MAX_K).contains(k))
        .ok_or_else(|| format!("job {job:?} window {window:?}: k {k} is out of range (1 to {MAX_K})"))
}

/// The job's windows as stored, checked as the job checks its configuration (positive sizes,
/// `k` from 1 to [`MAX_K`], unique names, at most 64 windows).
pub(crate) fn windows(job: &str, windows: Vec<StoredWindow>) -> Result<Vec<StoredWindow>, String> {
    for w in &windows {
        window_k(job, &w.name, i64::try_from(w.k).unwrap_or(i64::MAX))?;
    }
    let specs: Vec<WindowSpec> = windows
        .iter()
        .map(|w| WindowSpec {
            rank: Default::default(),
            key: Default::default(),
            name: w.name.clone(),
            size: w.size,
            slide: w.slide,
            k: w.k,
        })
        .collect();
    validate_all(&specs).map_err(|e| format!("job {job:?}: the recorded windows are invalid: {e}"))?;
    Ok(windows)
}

/// The job's last commit as read: the epoch fits the stores' signed 64-bit columns and the
/// watermark is not past the last event time (unless it is "end of input").
pub(crate) fn commit(job: &str, epoch: i64, watermark: Millis) -> Result<(u64, Millis), String> {
    let epoch = u64::try_from(epoch).map_err(|_| format!("job {job:?}: commit epoch {epoch} is negative"))?;
    if watermark > Millis::MAX_EVENT && watermark != Millis::MAX {
        return Err(format!(
            "job {job:?}: commit watermark {} ms is past year 9999",
            watermark.0
        ));
    }
    Ok((epoch, watermark))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlist_operators::time::Span;

    #[test]
    fn windows_and_commits() {
        let w = |k| StoredWindow {
            name: "5m".into(),
            size: Span::from_millis(300_000),
            slide: Span::from_millis(300_000),
            k,
            by: Vec::new(),
        };
        assert!(windows("j", vec![w(MAX_K)]).is_ok());
        let e = windows("j", vec![w(MAX_K + 1)]).err().unwrap();
        assert_eq!(e, "job \"j\" window \"5m\": k 1000001 is out of range (1 to 1000000)");
        let mut empty = w(3);
        empty.slide = Span::ZERO;
        let e = windows("j", vec![empty]).err().unwrap();
        assert_eq!(
            e,
            "job \"j\": the recorded windows are invalid: window \"5m\": size and slide must be positive"
        );
        assert!(windows("j", vec![w(3), w(3)]).is_err(), "a name twice");
        assert_eq!(window_k("j", "5m", 100), Ok(100));
        assert_eq!(
            window_k("j", "5m", 0).err().unwrap(),
            "job \"j\" window \"5m\": k 0 is out of range (1 to 1000000)"
        );
        assert_eq!(commit("j", 7, Millis::MAX), Ok((7, Millis::MAX)));
        assert_eq!(commit("j", 7, Millis::MIN), Ok((7, Millis::MIN)));
        assert!(commit("j", -1, Millis(0)).is_err());
        assert!(commit("j", 7, Millis(Millis::MAX_EVENT.0 + 1)).is_err());
    }
}
