//! The locks a job takes before it runs (issue #34): its node's `locks:` (keyed by one
//! of the node's inputs in this iteration) and the pools of its type.

use proto::{JobArgs, JobLock};
use spec::{Node, Sequence, Specs, WhenTaken};

use crate::Error;

/// The locks of one iteration of `node`, whose inputs are `inputs`; a key whose value
/// cannot name a lock is the caller's mistake (bad input).
pub(crate) fn node_locks(
    specs: &Specs,
    seq: &Sequence,
    node: &Node,
    inputs: &JobArgs,
) -> Result<Vec<JobLock>, Error> {
    let mut locks = Vec::with_capacity(node.locks.len());
    for lock in &node.locks {
        let Some(name) = &lock.name else { continue };
        let key = match &lock.key {
            None => String::new(),
            Some(key_arg) => {
                spec::lock_key(&name.value, &key_arg.value, inputs.get(&key_arg.value)).map_err(
                    |err| Error::Value {
                        sequence: seq.name.clone(),
                        node: node.name.clone(),
                        message: err.to_string(),
                    },
                )?
            }
        };
        // A node joining a pool by name without a limit of its own takes the pool's.
        let limit = match (
            &lock.limit,
            specs.pools().iter().find(|p| p.name == name.value),
        ) {
            (None, Some(pool)) => pool.limit(),
            _ => lock.limit(),
        };
        locks.push(JobLock {
            name: name.value.clone(),
            key,
            limit,
            when_taken: when_taken(lock.when_taken()).to_owned(),
            until: String::new(),
        });
    }
    Ok(locks)
}

/// The pools every job of `job_type` is in, as locks without a key.
pub(crate) fn pool_locks(specs: &Specs, job_type: &str, locks: &mut Vec<JobLock>) {
    for pool in specs.pools_of(job_type) {
        if locks
            .iter()
            .any(|lock| lock.name == pool.name && lock.key.is_empty())
        {
            continue;
        }
        locks.push(JobLock {
            name: pool.name.clone(),
            key: String::new(),
            limit: pool.limit(),
            when_taken: when_taken(WhenTaken::Queue).to_owned(),
            until: String::new(),
        });
    }
}

fn when_taken(policy: WhenTaken) -> &'static str {
    match policy {
        WhenTaken::Queue => "queue",
        WhenTaken::Skip => "skip",
        WhenTaken::CancelInProgress => "cancel-in-progress",
    }
}
