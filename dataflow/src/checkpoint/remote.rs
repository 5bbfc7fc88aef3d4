//! Checkpoints in object storage (`checkpoint.dir = "s3://bucket/prefix"`), through the
//! `object_store` crate.
//!
//! A checkpoint is still written to a local directory first (`checkpoint.local_dir`): every
//! file atomically, by the workers, as with a local `checkpoint.dir`. Before the store commits
//! it, the writer thread uploads it — every file, then its `MANIFEST` last — so a checkpoint is
//! usable in the bucket only once every file it lists is there, exactly as locally. A pane file
//! a checkpoint shares with the previous one (the same local inode) is copied inside the bucket
//! instead of uploaded again. An upload that fails is retried with a backoff: an outage of the
//! object store delays the commit (and, through backpressure, reading) but loses and duplicates
//! nothing. Every request the run makes (listing a checkpoint's files, fetching the other
//! processes' parts, uploading) is retried while the store's errors are transient (a refused
//! connection, a timeout, a 5xx answer) for up to [`OUTAGE_LIMIT`]; after that, or at once for
//! a lasting refusal (403, 404), the run fails and restarts from the last checkpoint in the
//! bucket. Retention deletes old checkpoints in the bucket too (a failure there is retried at
//! the next commit).
//!
//! At start (and for `hotlist checkpoints`), every checkpoint of the job in the bucket that has
//! a `MANIFEST` is downloaded into the local directory where it is missing, so a process on a
//! fresh machine restores from the bucket; restoring itself reads the local copy.
//! (That listing is not retried: a bucket that does not answer fails the start at once.)

use super::checkpoint_dir;
use crate::config::S3Target;
use anyhow::{anyhow, Context, Result};
use futures::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a request that keeps failing with transient errors is retried before the run
/// fails. `object_store` retries each try itself, but against a refused connection its ten
/// quick retries are over in about 1.5 s, far too soon for a server that restarts.
const OUTAGE_LIMIT: Duration = Duration::from_secs(600);

/// The longest wait between two tries of a failing request.
const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// One checkpoint in the bucket: whether it has its `MANIFEST` (is usable), and its files with
/// their sizes.
type RemoteCheckpoint = (bool, Vec<(String, u64)>);

/// A job's checkpoints in a bucket.
pub struct Remote {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    url: String,
    runtime: tokio::runtime::Runtime,
}

impl Remote {
    /// A client of `target` (credentials from the `AWS_*` environment variables).
    pub fn connect(target: &S3Target) -> Result<Remote> {
        let mut b = AmazonS3Builder::from_env().with_bucket_name(&target.bucket);
        if let Some(e) = &target.endpoint {
            b = b.with_endpoint(e);
        }
        if let Some(r) = &target.region {
            b = b.with_region(r);
        }
        if target.allow_http {
            b = b.with_allow_http(true);
        }
        let store = b
            .build()
            .with_context(|| format!("checkpoint.dir {}: cannot set up the S3 client", target.url()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the S3 client's runtime")?;
        Ok(Remote {
            store: Arc::new(store),
            prefix: target.prefix.clone(),
            url: target.url(),
            runtime,
        })
    }

    fn key(&self, rel: &str) -> ObjectPath {
        match self.prefix.is_empty() {
            true => ObjectPath::from(rel),
            false => ObjectPath::from(format!("{}/{rel}", self.prefix)),
        }
    }

    fn epoch_key(&self, job: &str, epoch: u64, name: &str) -> ObjectPath {
        self.key(&format!("{job}/{epoch:020}/{name}"))
    }

    /// Uploads checkpoint `epoch` of `job` from `base`: the files the bucket does not have yet
    /// (the workers uploaded their own parts), then `MANIFEST`; retried while the object store
    /// fails; returns how long it took. `previous`: the checkpoint uploaded before it, whose
    /// unchanged pane files are copied inside the bucket.
    pub fn upload(&self, base: &Path, job: &str, epoch: u64, previous: Option<u64>) -> Result<Duration> {
        let started = Instant::now();
        let there = self.epoch_files(job, epoch)?;
        let n = self.upload_matching(base, job, epoch, previous, |name| !there.iter().any(|t| t == name))?;
        let took = started.elapsed();
        tracing::debug!(
            "uploaded checkpoint {epoch} ({n} files) to {} in {:.3}s",
            self.url,
            took.as_secs_f64()
        );
        Ok(took)
    }

    /// Uploads worker `worker`'s part of the checkpoint in `dir` (its counter file, its pane
    /// files and its sketch file; `prev_dir`: its previous checkpoint, whose unchanged panes are
    /// copied inside the bucket) before the worker lets the epoch go: so each process's part is
    /// in the bucket whichever machine writes the checkpoint's `MANIFEST`.
    pub fn upload_part(&self, dir: &Path, worker: usize, prev_dir: Option<&Path>) -> Result<()> {
        let (base, job, epoch) =
            parts_of(dir).ok_or_else(|| anyhow!("{} is not a checkpoint directory", dir.display()))?;
        let previous = prev_dir.and_then(parts_of).map(|p| p.2);
        let counter = super::manifest::counter_file(worker);
        let sketch = super::sketch_file(worker);
        let panes = format!("pane-{worker:04}-");
        self.upload_matching(&base, &job, epoch, previous, |name| {
            name == counter || name == sketch || name.starts_with(&panes)
        })
        .map(|_| ())
    }

    /// Uploads the files of local checkpoint `epoch` that `pick` accepts (`MANIFEST` last, if
    /// picked); returns how many.
    fn upload_matching(
        &self,
        base: &Path,
        job: &str,
        epoch: u64,
        previous: Option<u64>,
        pick: impl Fn(&str) -> bool,
    ) -> Result<usize> {
        let dir = checkpoint_dir(base, job, epoch);
        let prev_dir = previous.map(|p| checkpoint_dir(base, job, p));
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .filter_map(|e| e.ok()?.file_name().to_str().map(str::to_string))
            .filter(|n| !n.ends_with(".tmp") && !n.ends_with(".download") && pick(n))
            .collect();
        names.sort_by(|a, b| (a == "MANIFEST").cmp(&(b == "MANIFEST")).then(a.cmp(b)));
        for name in &names {
            let shared = prev_dir
                .as_ref()
                .filter(|p| same_file(&p.join(name), &dir.join(name)))
                .map(|_| previous.unwrap_or_default());
            let to = self.epoch_key(job, epoch, name);
            let what = format!("upload of checkpoint {epoch}'s {name}");
            match shared {
                Some(p) => {
                    let from = self.epoch_key(job, p, name);
                    self.retry(&what, || self.store.copy(&from, &to))?;
                }
                None => {
                    // read once, outside the retries: a local error is not the store's outage
                    let path = dir.join(name);
                    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
                    let payload = PutPayload::from(bytes);
                    self.retry(&what, || async {
                        self.store.put(&to, payload.clone()).await.map(|_| ())
                    })?;
                }
            }
        }
        Ok(names.len())
    }

    /// The names of checkpoint `epoch`'s files in the bucket.
    fn epoch_files(&self, job: &str, epoch: u64) -> Result<Vec<String>> {
        let prefix = self.key(&format!("{job}/{epoch:020}"));
        let metas: Vec<object_store::ObjectMeta> = self.retry(&format!("listing of checkpoint {epoch}"), || {
            self.store.list(Some(&prefix)).try_collect()
        })?;
        Ok(metas
            .iter()
            .filter_map(|m| m.location.filename().map(str::to_string))
            .collect())
    }

    /// Downloads the files of checkpoint `epoch` that other processes uploaded and the local
    /// directory lacks (their parts, before the `MANIFEST` is written here).
    pub fn fetch_parts(&self, base: &Path, job: &str, epoch: u64) -> Result<usize> {
        let dir = checkpoint_dir(base, job, epoch);
        let mut n = 0;
        for name in self.epoch_files(job, epoch)? {
            if name == "MANIFEST" || dir.join(&name).exists() {
                continue;
            }
            self.fetch(&dir, job, epoch, &name)?;
            n += 1;
        }
        Ok(n)
    }

    /// Downloads one file of checkpoint `epoch` into `dir` (through a temporary file of this
    /// process, renamed into place).
    fn fetch(&self, dir: &Path, job: &str, epoch: u64, name: &str) -> Result<()> {
        let key = self.epoch_key(job, epoch, name);
        let bytes = self.retry(&format!("download of checkpoint {epoch}'s {name}"), || async {
            self.store.get(&key).await?.bytes().await
        })?;
        let tmp = dir.join(format!("{name}.{}.download", std::process::id()));
        super::write_atomic(&tmp, &bytes)?;
        std::fs::rename(&tmp, dir.join(name)).with_context(|| format!("cannot rename {} into place", tmp.display()))
    }

    /// Runs `op` until it succeeds, backing off (0.25 s doubling to [`MAX_BACKOFF`]) and
    /// logging while its errors are transient; the error once one is not, or once the next
    /// try would start more than [`OUTAGE_LIMIT`] after the first.
    fn retry<T, F, Fut>(&self, what: &str, op: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = object_store::Result<T>>,
    {
        let started = Instant::now();
        let mut delay = Duration::from_millis(250);
        let mut attempt = 1;
        loop {
            match self.runtime.block_on(op()) {
                Ok(v) => return Ok(v),
                Err(e) if transient(&e) && started.elapsed() + delay < OUTAGE_LIMIT => {
                    tracing::warn!(
                        "{}: {what} failed (attempt {attempt}, retrying in {delay:?}): {e}",
                        self.url
                    );
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(MAX_BACKOFF);
                    attempt += 1;
                }
                Err(e) => {
                    return Err(anyhow!(
                        "{}: {what} failed (attempt {attempt}, {:.1} s after the first): {e}",
                        self.url,
                        started.elapsed().as_secs_f64()
                    ))
                }
            }
        }
    }

    /// The job's checkpoints in the bucket: epoch → whether it has a `MANIFEST` (is usable),
    /// and its files with their sizes.
    fn remote_checkpoints(&self, job: &str) -> Result<BTreeMap<u64, RemoteCheckpoint>> {
        let prefix = self.key(job);
        let metas: Vec<object_store::ObjectMeta> = self
            .runtime
            .block_on(self.store.list(Some(&prefix)).try_collect())
            .with_context(|| format!("{}: cannot list the checkpoints of job {job:?}", self.url))?;
        let mut out: BTreeMap<u64, RemoteCheckpoint> = BTreeMap::new();
        for m in metas {
            let parts: Vec<&str> = m.location.as_ref().rsplitn(3, '/').collect();
            let [name, epoch, ..] = parts[..] else { continue };
            let Ok(epoch) = epoch.parse::<u64>() else { continue };
            let e = out.entry(epoch).or_default();
            e.0 |= name == "MANIFEST";
            e.1.push((name.to_string(), m.size));
        }
        Ok(out)
    }

    /// Downloads every usable checkpoint of `job` up to epoch `upto` that the local `base`
    /// lacks or holds only in part (a file missing or of another size than in the bucket: it
    /// is fetched, and the `MANIFEST` after everything else); returns the epochs downloaded.
    /// Several processes may do this into one shared directory at once: each writes through a
    /// temporary file of its own and renames it into place (the contents are the same).
    pub fn download(&self, base: &Path, job: &str, upto: u64) -> Result<Vec<u64>> {
        let mut got = Vec::new();
        for (epoch, (usable, mut files)) in self.remote_checkpoints(job)? {
            if !usable || epoch > upto {
                continue;
            }
            let dir = checkpoint_dir(base, job, epoch);
            let stale = |name: &str, size: u64| std::fs::metadata(dir.join(name)).map_or(true, |m| m.len() != size);
            if !files.iter().any(|(n, size)| stale(n, *size)) {
                continue;
            }
            files.sort_by_key(|(n, _)| n == "MANIFEST");
            for (name, _) in files.iter().filter(|(n, size)| n == "MANIFEST" || stale(n, *size)) {
                self.fetch(&dir, job, epoch, name)?;
            }
            got.push(epoch);
        }
        Ok(got)
    }

    /// Deletes the job's checkpoints in the bucket other than the newest `keep` usable ones
    /// at or below `committed` (and anything newer than `committed` left unusable).
    pub fn retain(&self, job: &str, committed: u64, keep: usize) -> Result<()> {
        let all = self.remote_checkpoints(job)?;
        let kept: Vec<u64> = all
            .iter()
            .rev()
            .filter(|(e, (usable, _))| **e <= committed && *usable)
            .take(keep)
            .map(|(e, _)| *e)
            .collect();
        for (epoch, (_, mut files)) in all {
            if kept.contains(&epoch) || epoch > committed {
                continue;
            }
            // the MANIFEST first: a half-deleted checkpoint is never taken for a usable one
            files.sort_by_key(|(n, _)| n != "MANIFEST");
            for (name, _) in &files {
                let key = self.epoch_key(job, epoch, name);
                let _ = self.runtime.block_on(self.store.delete(&key));
            }
        }
        Ok(())
    }

    /// The bucket URL, for messages.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Moves the job's checkpoints in the bucket aside (`--from-scratch`): copied under
    /// `<job>.aside-<millis>/`, then deleted; returns where.
    pub fn move_aside(&self, job: &str) -> Result<Option<String>> {
        let all = self.remote_checkpoints(job)?;
        if all.is_empty() {
            return Ok(None);
        }
        let aside = format!("{job}.aside-{}", hotlist_operators::time::Millis::now().0);
        for (epoch, (_, files)) in &all {
            for (name, _) in files {
                let from = self.epoch_key(job, *epoch, name);
                let to = self.key(&format!("{aside}/{epoch:020}/{name}"));
                self.runtime
                    .block_on(async {
                        self.store.copy(&from, &to).await?;
                        self.store.delete(&from).await
                    })
                    .with_context(|| format!("{}: cannot move checkpoint {epoch} aside", self.url))?;
            }
        }
        Ok(Some(format!("{}/{aside}", self.url)))
    }
}

/// Whether an error of the object store may pass (a refused connection, a timeout, a 5xx
/// answer: `object_store` reports those as `Generic`), as opposed to an answer that will stay
/// the same (not found, permission denied, a precondition).
fn transient(e: &object_store::Error) -> bool {
    matches!(
        e,
        object_store::Error::Generic { .. } | object_store::Error::JoinError { .. }
    )
}

/// A checkpoint directory's base, job and epoch (`<base>/<job>/<epoch, 20 digits>`).
fn parts_of(dir: &Path) -> Option<(std::path::PathBuf, String, u64)> {
    let epoch = super::epoch_of(dir)?;
    let job_dir = dir.parent()?;
    let job = job_dir.file_name()?.to_str()?.to_string();
    Some((job_dir.parent()?.to_path_buf(), job, epoch))
}

/// Whether two paths are the same file (a pane linked from the previous checkpoint).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::transient;

    /// A refused connection, a timeout or a 5xx answer (`Generic`) is retried; an answer that
    /// will stay the same fails the request at once.
    #[test]
    fn only_errors_that_may_pass_are_retried() {
        let generic = object_store::Error::Generic {
            store: "S3",
            source: "connection refused".into(),
        };
        assert!(transient(&generic));
        let not_found = object_store::Error::NotFound {
            path: "ckpt/x".into(),
            source: "404".into(),
        };
        assert!(!transient(&not_found));
        let denied = object_store::Error::PermissionDenied {
            path: "ckpt/x".into(),
            source: "403".into(),
        };
        assert!(!transient(&denied));
    }
}
