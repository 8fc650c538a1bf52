//! The database's plan of every read a store operation runs: [`explained`] runs the
//! operations of a future as usual and, first, asks the database to explain each SELECT
//! of theirs on the same connection with the same params (`EXPLAIN` on PostgreSQL and
//! MySQL, `EXPLAIN QUERY PLAN` on SQLite). The history benchmark shows with it which
//! index each query of the API and the web UI uses on a database of millions of requests
//! (issue #51), and the store's suite that none of them reads a whole table.

use std::cell::RefCell;
use std::future::Future;

/// One SELECT an operation ran, and how the database plans it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryPlan {
    /// The statement as Spindle writes it (`$N` placeholders).
    pub sql: String,
    /// The plan, a line per step, as the database says it.
    pub plan: Vec<String>,
    /// The tables of Spindle's the plan reads whole (a sequential scan, SQLite's `SCAN`
    /// without an index, MySQL's access type `ALL`): none for a query an index serves.
    pub full_scans: Vec<String>,
}

tokio::task_local! {
    static PLANS: RefCell<Vec<QueryPlan>>;
}

/// `work`'s output and the plan of every SELECT its store operations ran, in order.
/// Only the calls awaited within `work`'s own task are explained (not those of tasks it
/// spawns); outside it, statements run without a word to the database more.
pub async fn explained<F: Future>(work: F) -> (F::Output, Vec<QueryPlan>) {
    PLANS
        .scope(RefCell::new(Vec::new()), async move {
            let output = work.await;
            let plans = PLANS.with(|plans| plans.take());
            (output, plans)
        })
        .await
}

/// Whether the calling task is within [`explained`], and `sql` a read to explain.
/// Outside it (every statement of a running service) this is one task-local lookup.
pub(crate) fn wanted(sql: &str) -> bool {
    PLANS.try_with(|_| ()).is_ok()
        && sql
            .trim_start()
            .get(..6)
            .is_some_and(|head| head.eq_ignore_ascii_case("select"))
}

/// Records the plan of `sql` given as `plan`'s lines.
pub(crate) fn record(sql: &str, plan: Vec<String>, full_scans: Vec<String>) {
    let _ = PLANS.try_with(|plans| {
        plans.borrow_mut().push(QueryPlan {
            sql: sql.to_owned(),
            plan,
            full_scans,
        });
    });
}

/// Spindle's tables, the ones a plan's full scan is reported of (a derived table's or a
/// subquery's scan is not a table read whole).
pub(crate) const TABLES: &[&str] = &[
    "requests",
    "request_archives",
    "request_args",
    "request_audit",
    "job_log",
    "job_tries",
    "job_output",
    "suspended_job_chains",
    "job_runners",
    "approvals",
    "request_secrets",
    "request_locks",
    "notifications",
    "trigger_deliveries",
    "spec_versions",
];
