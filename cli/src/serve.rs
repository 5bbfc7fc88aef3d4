//! `hotlist serve`: the read API and live page over the job's sink store.

use anyhow::{Context, Result};
use hotlist_dataflow::config::{self, RedisTarget, SinkPlan};
use hotlist_server::limits::{self, ConnectionLimits};
use hotlist_sinks::{PostgresStore, RedisStore, SinkError, SqliteStore, StoreReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `hotlist serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The job's config: the store to read and the job id.
    #[arg(long, short, default_value = "configs/local.toml")]
    pub config: PathBuf,
    /// Address to listen on (loopback by default; use 0.0.0.0:PORT to expose it).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// How often to poll the store for a new commit (at least 10ms).
    #[arg(long, default_value = "100ms", value_parser = parse_poll)]
    pub poll: Duration,
    /// Override a config key (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Read from the job's sink ("sink") or from its Redis fan-out ("redis": latest lists
    /// only; date/at lookups then find only the latest instance).
    #[arg(long, value_enum, default_value_t = From::Sink)]
    pub from: From,
    /// Open connections at most; a new one past the limit closes the longest-idle one first.
    /// [default: 1024, lowered to the open-file limit minus 32]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: Option<u32>,
    /// Time a client has to send a request's head, from connecting or from the head's first
    /// byte; slower or silent clients are closed.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_positive_duration)]
    pub header_timeout: Duration,
    /// Time a keep-alive connection may wait for its next request.
    #[arg(long, value_name = "DURATION", default_value = "75s", value_parser = parse_positive_duration)]
    pub idle_timeout: Duration,
    /// Time a request may take before it is answered 503.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_positive_duration)]
    pub request_timeout: Duration,
    /// Store lookups (older instances, per-group lists, group listings) waiting at most for
    /// the history thread; past it a lookup is answered 503 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = limits::DEFAULT_HISTORY_QUEUE as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub history_queue: u32,
}

impl ServeArgs {
    /// The connection limits of the flags, with the connection limit lowered to fit the
    /// process's open-file limit (and a note on stderr when it was).
    pub fn limits(&self) -> ConnectionLimits {
        let requested = self
            .max_connections
            .map_or(limits::DEFAULT_MAX_CONNECTIONS, |n| n as usize);
        let open_files = limits::open_file_limit();
        let max_connections = limits::cap_to_open_files(requested, open_files);
        if max_connections < requested {
            eprintln!(
                "note: at most {max_connections} connections (the open-file limit is {}; raise it with ulimit -n)",
                open_files.unwrap_or(0)
            );
        }
        ConnectionLimits {
            header_timeout: self.header_timeout,
            idle_timeout: self.idle_timeout,
            request_timeout: self.request_timeout,
            max_connections,
        }
    }
}

/// Which store `serve` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum From {
    /// The job's sink (SQLite, PostgreSQL or Redis).
    Sink,
    /// The Redis fan-out (`sink.redis_url`).
    Redis,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    hotlist_operators::time::Span::parse(s).map(|s| s.as_std())
}

/// `--poll`: at least [`limits::MIN_POLL`] (0 made the refresher a busy loop on the store).
fn parse_poll(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d < limits::MIN_POLL => Err(format!(
            "must be at least {}ms (polling faster only loads the store)",
            limits::MIN_POLL.as_millis()
        )),
        d => Ok(d),
    }
}

fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err("must be more than 0".into()),
        d => Ok(d),
    }
}

type Opener = Arc<dyn Fn() -> Result<Box<dyn StoreReader>, SinkError> + Send + Sync>;

/// The reader for a sink plan.
pub fn opener(sink: &SinkPlan) -> Result<Opener> {
    match sink {
        SinkPlan::Sqlite(path) => {
            let path = path.clone();
            Ok(Arc::new(move || {
                SqliteStore::open_read_only(&path).map(|s| Box::new(s) as Box<dyn StoreReader>)
            }))
        }
        SinkPlan::Postgres { url, schema, timeouts } => {
            let (url, schema, timeouts) = (url.clone(), schema.clone(), *timeouts);
            // a reader: no DDL (a SELECT-only role serves), the schema version checked
            Ok(Arc::new(move || {
                PostgresStore::open_reader(&url, &schema, timeouts).map(|s| Box::new(s) as Box<dyn StoreReader>)
            }))
        }
        SinkPlan::Redis(t) => Ok(redis_opener(t)),
        SinkPlan::Memory(_) => anyhow::bail!("the config's sink is in memory: nothing to serve"),
    }
}

fn redis_opener(t: &RedisTarget) -> Opener {
    let t = t.clone();
    Arc::new(move || RedisStore::connect(&t.url, &t.prefix).map(|s| Box::new(s) as Box<dyn StoreReader>))
}

/// Runs the server until Ctrl-C / SIGTERM.
pub fn serve(args: &ServeArgs) -> Result<()> {
    let plan = config::load(&args.config, &config::Overrides::with_set(&args.set))?;
    let open = match args.from {
        From::Sink => opener(&plan.sink)?,
        From::Redis => match (&plan.fanout, &plan.sink) {
            (Some(t), _) | (None, SinkPlan::Redis(t)) => redis_opener(t),
            _ => anyhow::bail!("--from redis: the config has no Redis (set sink.redis_url)"),
        },
    };
    // Tables this build does not read are a one-line error at start; an unreachable server is
    // not (serve answers 503 until it comes).
    if let (From::Sink, SinkPlan::Postgres { .. }) = (args.from, &plan.sink) {
        if let Err(e @ SinkError::Schema { .. }) = open().map(drop) {
            anyhow::bail!("cannot serve: {e}");
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let addr = listener.local_addr().context("listener address")?;
        println!(
            "serving job {:?} on http://{addr}/ (API: /v1/top?window=…, /v1/windows, /livez, /readyz, /metrics)",
            plan.job_id
        );
        let options = hotlist_server::ServeOptions {
            job: plan.job_id.clone(),
            open,
            poll: args.poll,
            history_queue: args.history_queue as usize,
            max_age: plan.time.emit_interval.as_std(),
            limits: args.limits(),
        };
        hotlist_server::run(listener, options, shutdown_signal())
            .await
            .context("server failed")
    })
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    /// Without flags, the limits are the server crate's defaults (the flags' defaults are
    /// written out for `--help`; this keeps them equal).
    #[test]
    fn flag_defaults_are_the_server_defaults() {
        let cli = Cli::try_parse_from(["serve"]).expect("parse");
        let defaults = ConnectionLimits::default();
        assert_eq!(
            cli.serve.limits(),
            ConnectionLimits {
                max_connections: limits::cap_to_open_files(defaults.max_connections, limits::open_file_limit()),
                ..defaults
            }
        );
        let cli = Cli::try_parse_from(["serve", "--max-connections", "7", "--idle-timeout", "2s"]).expect("parse");
        assert_eq!(
            (cli.serve.limits().max_connections, cli.serve.idle_timeout),
            (7, Duration::from_secs(2))
        );
        assert!(Cli::try_parse_from(["serve", "--request-timeout", "0ms"]).is_err());
        assert!(Cli::try_parse_from(["serve", "--max-connections", "0"]).is_err());
        for poll in ["0ms", "9ms"] {
            assert!(Cli::try_parse_from(["serve", "--poll", poll]).is_err(), "{poll}");
        }
        assert_eq!(
            Cli::try_parse_from(["serve", "--poll", "10ms"])
                .expect("parse")
                .serve
                .poll,
            limits::MIN_POLL
        );
        assert_eq!(cli.serve.history_queue as usize, limits::DEFAULT_HISTORY_QUEUE);
    }
}
