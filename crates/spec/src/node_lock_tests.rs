//! The checks of a node's `locks:` and of the specs' `pools:` (issue #34).

use crate::Severity::Error;
use crate::tests::{case, lint};

/// A request type `deploy` (required `hosts`, a list) whose node `restart` runs a job
/// over each host with the given `locks:` body; `top` is what the file holds beside
/// `sequences:` (pools).
fn node_lock_spec(locks: &str, top: &str) -> String {
    format!(
        "{top}sequences:
  deploy:
    request: true
    args:
      required:
        - name: hosts
        - name: cluster
    nodes:
      restart:
        category: job
        type: shell-command
        each: [hosts:host]
        args:
          - expected: cluster
        locks:
{locks}
"
    )
}

const GOOD: &str = "          - name: host-ops\n            key: host";
const POOLS: &str = "pools:\n  ssh:\n    limit: 20\n    types: [shell-command]\n";

#[test]
fn a_nodes_locks_are_checked_like_a_types() {
    let good = node_lock_spec(GOOD, POOLS);
    assert!(
        lint(&good).iter().all(|d| !d.code.starts_with('L')),
        "{:#?}",
        lint(&good)
    );
    case(
        "L1",
        Error,
        &node_lock_spec("          - key: host #!", ""),
        &good,
    );
    // A key names an `each:` element or an arg the node passes, not a sequence arg the
    // node does not pass.
    case(
        "L2",
        Error,
        &node_lock_spec("          - name: host-ops\n            key: hosts #!", ""),
        &node_lock_spec("          - name: host-ops\n            key: cluster", ""),
    );
    case(
        "L3",
        Error,
        &node_lock_spec("          - name: host-ops\n            limit: 0 #!", ""),
        &good,
    );
    case(
        "L9",
        Error,
        &node_lock_spec(
            "          - name: host-ops\n            when_taken: cancel-in-progress #!",
            "",
        ),
        &node_lock_spec(
            "          - name: host-ops\n            when_taken: skip",
            "",
        ),
    );
    case(
        "L9",
        Error,
        &node_lock_spec(
            "          - name: host-ops\n            fair_by: user #!",
            "",
        ),
        &good,
    );
    // One limit per lock across nodes and pools; a node joining a pool without a limit
    // takes the pool's.
    case(
        "L6",
        Error,
        &node_lock_spec("          - name: ssh\n            limit: 3 #!", POOLS),
        &node_lock_spec("          - name: ssh", POOLS),
    );
}

#[test]
fn a_lock_is_held_by_requests_or_by_jobs_not_both() {
    let both = format!(
        "{}  failover:
    request: true
    args:
      required:
        - name: cluster
    locks:
      - name: host-ops #!
    nodes:
      a:
        category: job
        type: t
",
        node_lock_spec(GOOD, "")
    );
    let found = lint(&both);
    let hit = found.iter().find(|d| d.code == "L10");
    assert!(
        hit.is_some_and(|d| d.message.contains("by requests") && d.message.contains("expected")),
        "{found:#?}"
    );
}

#[test]
fn pools_are_read_and_checked() {
    let found = lint(&node_lock_spec(
        GOOD,
        "pools:\n  ssh:\n    limit: 0\n    typez: [shell-command]\n",
    ));
    let limit = found
        .iter()
        .find(|d| d.field.as_deref() == Some("pools.ssh.limit"));
    assert!(
        limit.is_some_and(|d| d.line == Some(3) && d.message.contains("expected at least 1")),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|d| d.message.contains("typez") && d.message.contains("did you mean `types`")),
        "{found:#?}"
    );
    let found = lint(&node_lock_spec(GOOD, "pools:\n  ssh: 20\n"));
    assert!(
        found.iter().any(|d| d.message.contains("expected a pool")),
        "{found:#?}"
    );
}
