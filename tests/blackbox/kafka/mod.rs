//! Kafka end to end, against a real Kafka-protocol broker (tansu, SQLite storage, on loopback;
//! `scripts/test` installs it): events produced by `hotlist produce` (3 events per message),
//! the same records written as files by `hotlist generate` for the model. A bounded run equals
//! the model; killed with SIGKILL again and again while the producer writes (one process, and
//! a 2-process cluster) it still does, into PostgreSQL; it rides out the broker being stopped
//! for 10 s and PostgreSQL being restarted; reprocessing from a point in time sees exactly the
//! newer messages.

// the broker (tansu) and the edits of its storage
mod broker;
// the data set, the job's config and runs, PostgreSQL, metrics: what the tests below share
mod harness;

// a bounded run, SIGKILLs while producing, a fallback: the model's results, exactly once
mod exactly_once;
// the broker stopped for 10 s; PostgreSQL restarted under a live run
mod outages;
// reprocessing from a point in time; `exact_at_seal` replays by offset
mod replay;
// oversized messages and events ahead of their message's timestamp
mod dead_letters;
// a run after a bounded run reads on from its offsets
mod resume;
// a sealed event's new user, in a job with two paired distinct-user windows
mod sealed_users;
// `hotlist explain` reading instances' offsets again
mod explain;
// a re-created topic, messages deleted by retention: refused unless accepted, then counted
mod data_loss;
// partitions added while the job runs
mod discovery;
// Rust UDFs computing ids, dims and a filter on messages, against the model of `../udf.rs`
mod udf;
