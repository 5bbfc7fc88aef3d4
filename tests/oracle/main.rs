//! Oracle tests: the job's results equal an independent computation of them: the brute-force
//! model of docs/time.md's rules (`hotlist_tests::model`), through the dataflow in this process
//! and through the built `hotlist` binary (also when it is killed and restored), or a result
//! worked out by hand for the feature under test.
//!
//! One binary: the tests of every module run on the threads of one process; each has its own
//! temporary directory and loopback ports, and none uses a shared service.

// random inputs through the real dataflow on 1, 2 and 4 workers = the model
mod oracle;
// Nexmark Q5 with the shipped config = an independent computation
mod nexmark_q5;
// counting distinct users: bot resistance, per-group lists
mod distinct_users;
// the hot-key detector: surges, hysteresis, sample rates, restarts
mod hot_keys;
// sketch windows killed and restored: their stated bounds hold against the model
mod sketch_windows;
// `exact_at_seal` killed and restored: exact, certified, the model's lists
mod exact_at_seal;
// the UDF batch path: every record the model's outcome, whatever the batches
mod udf_batches;
