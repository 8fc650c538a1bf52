//! The locks the grapher gives jobs (issue #34): a job node's, keyed by its inputs in
//! each iteration; a sequence node's, taken by the sequence's first job and released by
//! its last; a pool's, on every job of its types.

use proto::{JobChain, JobLock};
use serde_json::json;

use crate::tests::{args, grapher};

const SPECS: &str = "pools:
  quota:
    limit: 2
    types: [t]
sequences:
  deploy:
    request: true
    args:
      required:
        - name: hosts
        - name: cluster
    nodes:
      restart:
        category: job
        type: u
        each: [hosts:host]
        locks:
          - name: host-ops
            key: host
            when_taken: skip
      drain:
        category: sequence
        type: drain-seq
        deps: [restart]
        args:
          - expected: cluster
        locks:
          - name: cluster-ops
            key: cluster
            limit: 2
  drain-seq:
    args:
      required:
        - name: cluster
    nodes:
      call:
        category: job
        type: t
";

fn job<'c>(chain: &'c JobChain, name: &str) -> Vec<&'c proto::Job> {
    chain.jobs.values().filter(|job| job.name == name).collect()
}

#[test]
fn jobs_carry_their_nodes_locks_and_their_pools() {
    let created = grapher(SPECS)
        .create(
            "deploy",
            &args(json!({"hosts": ["web-1", "web-2"], "cluster": "db-7"})),
        )
        .unwrap();
    let chain = &created.job_chain;
    // One lock per host, in each iteration.
    let mut keys: Vec<(&str, &str)> = job(chain, "restart")
        .iter()
        .flat_map(|job| job.locks.iter())
        .map(|lock| (lock.name.as_str(), lock.key.as_str()))
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, [("host-ops", "web-1"), ("host-ops", "web-2")]);
    assert!(job(chain, "restart")[0].locks[0].when_taken == "skip");
    // The sequence's lock: on its first job, until its last, which releases it.
    let holders: Vec<&proto::Job> = chain
        .jobs
        .values()
        .filter(|j| !j.locks.is_empty() && j.job_type == "noop")
        .collect();
    assert_eq!(holders.len(), 1, "{holders:#?}");
    let begin = holders[0];
    let lock = &begin.locks[0];
    assert_eq!(
        (lock.name.as_str(), lock.key.as_str(), lock.limit),
        ("cluster-ops", "db-7", 2)
    );
    let end = &chain.jobs[&lock.until];
    assert_eq!(end.releases_locks_of, begin.id);
    assert_eq!(
        end.sequence_id, begin.id,
        "the last job of the same sequence"
    );
    // The pool: every job of type `t`, without a key.
    let call = job(chain, "call");
    assert_eq!(
        call[0].locks,
        [JobLock {
            name: "quota".to_owned(),
            key: String::new(),
            limit: 2,
            when_taken: "queue".to_owned(),
            until: String::new(),
        }]
    );
    // No other job carries any.
    let with_locks = chain.jobs.values().filter(|j| !j.locks.is_empty()).count();
    assert_eq!(
        with_locks, 4,
        "two restarts, the sequence's first job, its call"
    );
}

#[test]
fn a_lock_key_that_cannot_name_a_lock_is_bad_input() {
    let err = grapher(SPECS)
        .create(
            "deploy",
            &args(json!({"hosts": ["web-1"], "cluster": ["a", "b"]})),
        )
        .unwrap_err();
    assert!(err.is_input(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("cluster-ops") && text.contains("expected a string"),
        "{text}"
    );
}
