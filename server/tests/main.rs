//! The HTTP server against real stores: a writer commits through the sinks crate while the
//! real server (on 127.0.0.1:0) serves what it reads.
//!
//! One binary: the tests of every module run on the threads of one process. Each has its own
//! server, SQLite file, PostgreSQL schema and Redis key prefix; the test that lowers the
//! process's open-file limit runs in a process of its own.

// the harness: a real store, a writer through the sinks crate, the real server on port 0
mod common;

// the API on SQLite: exact lists, refreshes, no mixed revisions, bad requests
mod api;
// the same checks on PostgreSQL and Redis
mod api_stores;
// per-group lists: selecting a group, refusing foreign dims, listing groups
mod groups;
// the accept loop at the process's open-file limit
mod fd_limit;
