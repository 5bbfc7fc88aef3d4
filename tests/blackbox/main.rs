//! Black-box tests: the built `hotlist` binary (`cargo build -p hotlist --bin hotlist`)
//! run as a user runs it, against real services (PostgreSQL, Redis, a Kafka-protocol broker, an
//! S3-compatible server, a headless browser), under kills, outages, hostile input and hostile
//! clients.
//!
//! One binary: the tests of every module run on the threads of one process. What they share is
//! kept apart: each test has its own temporary directory, loopback ports, PostgreSQL schema,
//! Redis key prefix, broker and S3 server; a test that uses the local PostgreSQL holds
//! [`hotlist_tests::serial::postgres`], the one that restarts it holds
//! [`hotlist_tests::serial::postgres_alone`].

// the binary on files and stdin, into SQLite, PostgreSQL and Redis, against the model
mod e2e;
// killed with SIGKILL and restarted, damaged checkpoints, clusters: nothing lost, nothing twice
mod crash;
// started the wrong way: a wrong store, lost checkpoints, two runs, a stale writer
mod restart;
// Kafka against a real broker: exactly once, outages, replays, data loss, discovery
mod kafka;
// checkpoints in object storage against a real S3-compatible server
mod s3_checkpoints;
// the Redis fan-out with Redis servers of the test's own: outages, bounded memory, catching up
mod fanout;
// state that must not grow with rotating group values: the latest-list map, Redis group keys
mod latest_state;
// `hotlist serve` under slow, idle and too many clients, and over a corrupt row
mod serve;
// the live page in headless Chromium
mod browser;
// `hotlist explain`: an item's count in a sealed instance taken apart, against the model
mod explain;
// PostgreSQL that stops answering: client timeouts, retries
mod pg_timeouts;
// `serve` and `query` under a SELECT-only role, and over an older schema
mod pg_readonly;
// `query` and `serve` over a damaged store
mod corrupt_store;
// `query` of approximate lists and sketch checks in every store
mod list_accuracy;
// hostile input: event times outside the range or far ahead, and at PostgreSQL's limits
mod event_times;
// hostile input: an input file that cannot be read
mod read_errors;
// hostile input: a 300 MB line, in a file and on stdin
mod record_size;
// hostile input: byte order marks, blank lines, long dim values, floods of bad lines
mod input_edges;
// floods of bad lines: dead letters beyond a cap per block are summarised, deterministically
mod dead_letter_cap;
// configurations the job cannot serve, refused at start with one line
mod config_limits;
// epochs closed by records (`run.max_epoch_records`): where epochs end changes nothing sealed
mod epoch_bounds;
// the largest values the job admits, committed into PostgreSQL
mod store_limits;
// one file read as byte ranges (`source.split`): every line once, on any worker count; a
// restore onto a file whose ranges would move is refused
mod file_split;
// a file of several MiB read ahead on a helper thread and on the workers: the model's lists
mod read_ahead;
// the dashboard's and alert rules' metrics, each exported by a run of the job or `serve`
mod dashboard;
// Rust UDFs (`[[udf]]`) computing ids, dims and a filter, against a model of them; panics, restores
mod udf;
