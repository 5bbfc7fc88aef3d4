//! The store conformance suite: the contract of [`SinkStore`] and [`StoreReader`], checked the
//! same way on every backend (memory, SQLite, PostgreSQL, Redis).
//!
//! A backend joins with one line in its test module, `crate::conformance::suite!(subject);`,
//! where `subject()` returns a [`Subject`]: a fresh, isolated store (a temporary file, a schema
//! or a key prefix of its own, removed when the subject is dropped) and the ways to open
//! writers and readers on it. The macro makes one `#[test]` per case, named after the case, in
//! `<backend>::tests::conformance`.
//!
//! Backends differ in what they keep, and that is data in the subject, not a copied test:
//! [`Subject::history`] is `None` for a store that keeps only each window's latest list and no
//! dead letters (Redis), [`Subject::stored_rows`] is `Some` where the rows can be looked at
//! around the store (the SQL stores), [`Subject::damage`] is `Some` where stored data can be
//! damaged around the store (every backend but memory), and [`Subject::locks`] says whether the
//! store has a liveness lock (the SQL stores; every store fences stale writers by the
//! generation). What only one backend does (its encoding, key layout, error texts, connection
//! handling) is tested in that backend's `tests.rs`.
//!
//! Files: `subject` (the [`Subject`], [`Damage`], [`History`]), and the cases by concern:
//! `commits`, `dead_letters`, `corrupt`, `accuracy`, `ownership`, `concurrency`, `hot_keys`,
//! `groups`, `ranges` (sealed instances' input ranges), `trends` (run by [`trend_suite!`] on the stores that keep trend lists); and
//! `fanout`, the Redis fan-out against the SQLite store it copies (its own test: a fan-out is no
//! backend).

mod accuracy;
mod commits;
mod concurrency;
mod corrupt;
mod dead_letters;
#[cfg(test)]
mod fanout;
mod groups;
mod hot_keys;
mod ownership;
mod ranges;
mod subject;
mod trends;

pub(crate) use accuracy::{
    certified_lists_round_trip, damaged_accuracy_is_reported, damaged_certificates_are_reported,
    lists_say_what_they_are,
};
pub(crate) use commits::{
    dead_letters_round_trip_raw_bytes, epochs_at_or_below_the_committed_one_are_skipped,
    highest_revision_replaces_rows, invalid_input_changes_nothing, latest_instances_and_windows,
};
pub(crate) use concurrency::{concurrent_reader_never_sees_a_mix_of_revisions, throughput};
pub(crate) use corrupt::{a_list_longer_than_its_windows_k_is_corrupt, damaged_rows_are_reported_never_trusted};
pub(crate) use dead_letters::{dead_letter_summaries_add_up_per_block, dead_letters_are_found_by_their_bytes};
pub(crate) use groups::groups_are_lists_of_their_own;
pub(crate) use hot_keys::{damaged_hot_keys_are_reported, hot_keys_round_trip};
pub(crate) use ownership::{
    a_claim_fences_the_previous_owner, reset_forgets_the_job_and_nothing_else, the_lock_keeps_a_second_run_out,
};
pub(crate) use ranges::{damaged_ranges_are_reported, sealed_ranges_round_trip};
pub(crate) use subject::{sql_certificate_columns, sql_sketch_columns, Damage, History, Subject};
pub(crate) use trends::trend_lists_round_trip;

/// Runs every case of the suite on the backend whose subject `$subject()` opens: one
/// `#[test]` per case, named after it, in a module `conformance`. A new case is a function
/// in the file of its concern, re-exported above, and its name in the list.
macro_rules! suite {
    ($subject:path) => {
        $crate::conformance::suite!(
            @cases $subject;
            highest_revision_replaces_rows,
            epochs_at_or_below_the_committed_one_are_skipped,
            dead_letters_round_trip_raw_bytes,
            dead_letter_summaries_add_up_per_block,
            dead_letters_are_found_by_their_bytes,
            latest_instances_and_windows,
            invalid_input_changes_nothing,
            concurrent_reader_never_sees_a_mix_of_revisions,
            a_list_longer_than_its_windows_k_is_corrupt,
            damaged_rows_are_reported_never_trusted,
            lists_say_what_they_are,
            damaged_accuracy_is_reported,
            certified_lists_round_trip,
            damaged_certificates_are_reported,
            a_claim_fences_the_previous_owner,
            the_lock_keeps_a_second_run_out,
            reset_forgets_the_job_and_nothing_else,
            hot_keys_round_trip,
            damaged_hot_keys_are_reported,
            groups_are_lists_of_their_own,
            sealed_ranges_round_trip,
            damaged_ranges_are_reported,
        );
    };
    (@cases $subject:path; $($case:ident,)*) => {
        /// The store conformance suite ([`crate::conformance`]) on this backend.
        mod conformance {
            use super::*;

            $(
                #[test]
                fn $case() {
                    $crate::conformance::$case($subject());
                }
            )*

            /// `cargo test -p hotlist-sinks --release -- --ignored --nocapture throughput`
            #[test]
            #[ignore = "benchmark"]
            fn throughput() {
                $crate::conformance::throughput($subject());
            }
        }
    };
}
pub(crate) use suite;

/// The cases of trend lists, on the backends that store them (SQLite, PostgreSQL): one more
/// line in the backend's test module, `crate::conformance::trend_suite!(subject);`, makes one
/// `#[test]` per case in a module `trend_conformance`. (The cases join [`suite!`]'s list once
/// every backend stores trend lists.)
macro_rules! trend_suite {
    ($subject:path) => {
        /// The trend-list cases of the conformance suite ([`crate::conformance`]) on this
        /// backend.
        mod trend_conformance {
            use super::*;

            #[test]
            fn trend_lists_round_trip() {
                $crate::conformance::trend_lists_round_trip($subject());
            }
        }
    };
}
pub(crate) use trend_suite;
