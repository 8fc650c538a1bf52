//! The checks of a request type's `locks:` (issue #34): each names a lock, keys it by one
//! of the type's args, allows at least one holder and a policy that exists; a lock is
//! named once per type, every type naming it agrees on its limit, and a fair lock is fair
//! by the caller or by an arg.

use super::*;
use crate::model::{Lock, WhenTaken};

impl Checker<'_> {
    /// L1-L5, L7, L8: one type's lock declarations.
    pub(super) fn sequence_locks(&mut self, seq: &Sequence) {
        if !seq.locks.is_empty() && !seq.request {
            let message = format!(
                "sequence `{}` declares locks but is not a request type; expected `locks` on a request type (`request: true`): a request holds its type's locks while it runs",
                seq.name
            );
            self.push(
                Error,
                "L5",
                seq,
                None,
                "locks",
                seq.pos_of("locks"),
                message,
            );
        }
        let args: Vec<&str> = seq.arg_names().collect();
        self.lock_entries(seq, None, &seq.locks, &args);
    }

    /// L1-L4, L7 and L9 on a node's `locks:`: keyed by an arg the node passes (an
    /// `args:` entry's `expected`, or an `each:` element), queued or skipped.
    pub(super) fn node_locks(&mut self, seq: &Sequence, node: &Node) {
        if node.locks.is_empty() {
            return;
        }
        let mut args: Vec<&str> = node.node_args().filter_map(|arg| arg.expected()).collect();
        args.extend(
            node.each
                .iter()
                .filter_map(|each| split_each(&each.value).map(|(_, element)| element)),
        );
        self.lock_entries(seq, Some(node), &node.locks, &args);
    }

    /// The checks of one list of lock declarations, of a request type (`node` None) or
    /// of a node; `args`: what a key may name.
    // Long because it is one list of checks, each with its message.
    fn lock_entries(&mut self, seq: &Sequence, node: Option<&Node>, locks: &[Lock], args: &[&str]) {
        let owner = match node {
            None => format!("`{}`", seq.name),
            Some(node) => format!("node `{}`", node.name),
        };
        let mut named: HashMap<&str, Pos> = HashMap::new();
        for lock in locks {
            let Some(name) = lock
                .name
                .as_ref()
                .filter(|name| !name.value.trim().is_empty())
            else {
                let message = "lock has no `name`; expected the name of the lock, shared by every type that names it".to_owned();
                self.push(Error, "L1", seq, node, "locks.name", lock.pos, message);
                continue;
            };
            if let Some(first) = named.insert(&name.value, name.pos) {
                let message = format!(
                    "lock `{}` is declared twice (first at line {}); expected each lock once per {}",
                    name.value,
                    first.line,
                    if node.is_some() { "node" } else { "type" }
                );
                self.push(Error, "L7", seq, node, "locks.name", name.pos, message);
            }
            if let Some(key) = &lock.key
                && !args.contains(&key.value.as_str())
            {
                let what = if node.is_some() {
                    "one of the args it passes (an `args:` entry's `expected`) or an `each:` element"
                } else {
                    "one of its args"
                };
                let message = format!(
                    "lock `{}` is keyed by `{}`, which is not an arg of {owner}{}; expected {what}: {}",
                    name.value,
                    key.value,
                    crate::near::did_you_mean(&key.value, args.iter().copied()),
                    quoted(args.iter().copied())
                );
                self.push(Error, "L2", seq, node, "locks.key", key.pos, message);
            }
            if let Some(fair_by) = &lock.fair_by {
                if node.is_some() {
                    let message = format!(
                        "lock `{}` of a node has `fair_by`; expected `fair_by` only on a request type's locks (a node's waiters are served first come, first served)",
                        name.value
                    );
                    self.push(
                        Error,
                        "L9",
                        seq,
                        node,
                        "locks.fair_by",
                        fair_by.pos,
                        message,
                    );
                } else if fair_by.value != "user" && !args.contains(&fair_by.value.as_str()) {
                    let choices = std::iter::once("user").chain(args.iter().copied());
                    let message = format!(
                        "lock `{}` is fair by `{}`, which is neither `user` nor an arg of {owner}{}; expected `user` (the caller) or one of its args: {}",
                        name.value,
                        fair_by.value,
                        crate::near::did_you_mean(&fair_by.value, choices.clone()),
                        quoted(choices)
                    );
                    self.push(
                        Error,
                        "L8",
                        seq,
                        node,
                        "locks.fair_by",
                        fair_by.pos,
                        message,
                    );
                }
            }
            if let Some(limit) = lock.limit.as_ref().filter(|limit| limit.value < 1) {
                let message = format!(
                    "lock `{}` has `limit: {}`; expected at least 1 (1 is a mutex, n lets n holders hold it at once)",
                    name.value, limit.value
                );
                self.push(Error, "L3", seq, node, "locks.limit", limit.pos, message);
            }
            if let Some(when) = &lock.when_taken {
                match WhenTaken::parse(&when.value) {
                    None => {
                        let message = format!(
                            "lock `{}` has `when_taken: {}`{}; expected one of: {}",
                            name.value,
                            when.value,
                            crate::near::did_you_mean(&when.value, WhenTaken::NAMES),
                            quoted(WhenTaken::NAMES)
                        );
                        self.push(
                            Error,
                            "L4",
                            seq,
                            node,
                            "locks.when_taken",
                            when.pos,
                            message,
                        );
                    }
                    Some(WhenTaken::CancelInProgress) if node.is_some() => {
                        let message = format!(
                            "lock `{}` of a node has `when_taken: cancel-in-progress`; expected `queue` or `skip` (only a request type's lock may stop its holders)",
                            name.value
                        );
                        self.push(
                            Error,
                            "L9",
                            seq,
                            node,
                            "locks.when_taken",
                            when.pos,
                            message,
                        );
                    }
                    Some(_) => {}
                }
            }
        }
    }
}

/// L6: every request type, node and pool naming a lock gives it the same limit (the
/// first one met, in the specs' order — pools first — is the one the others are measured
/// against; a node's lock that names a pool without a `limit:` takes the pool's). L10: a
/// lock is held by requests (a type's `locks:`) or by jobs (nodes' `locks:`, pools), not
/// both: the two wait differently. A pool's limit is at least 1 (L3).
pub(super) fn lock_limits_agree(checker: &mut Checker<'_>) {
    // The first limit of each lock, where it was given, and whether requests hold it.
    let mut first: HashMap<String, (u32, String, bool)> = HashMap::new();
    for pool in checker.specs.pools() {
        if let Some(limit) = pool.limit.as_ref().filter(|limit| limit.value < 1) {
            let message = format!(
                "pool `{}` has `limit: {}`; expected at least 1 (how many of its jobs may run at once)",
                pool.name, limit.value
            );
            checker
                .out
                .push(pool_diagnostic(pool, limit.pos, "limit", message));
        }
        first.insert(
            pool.name.clone(),
            (pool.limit(), format!("pool `{}`", pool.name), false),
        );
    }
    let pools: HashSet<&str> = checker
        .specs
        .pools()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let mut pushes = Vec::new();
    for seq in checker.specs.sequences() {
        let own = seq.locks.iter().map(|lock| (lock, None));
        let nodes = seq
            .nodes
            .iter()
            .flat_map(|node| node.locks.iter().map(move |lock| (lock, Some(node))));
        for (lock, node) in own.chain(nodes) {
            let Some(name) = &lock.name else { continue };
            if node.is_some() && lock.limit.is_none() && pools.contains(name.value.as_str()) {
                continue;
            }
            let limit = lock.limit();
            let here = match node {
                None => format!("`{}`", seq.name),
                Some(node) => format!("node `{}` of `{}`", node.name, seq.name),
            };
            let by_requests = node.is_none();
            match first.get(&name.value) {
                None => {
                    first.insert(name.value.clone(), (limit, here, by_requests));
                }
                Some((_, owner, requests)) if *requests != by_requests => {
                    let message = format!(
                        "lock `{}` is held by requests in one place and by jobs in another ({owner}); expected a lock named only by request types (`locks:` beside `request: true`) or only by nodes and pools",
                        name.value
                    );
                    pushes.push(("L10", seq, node, name.pos, message));
                }
                Some((other, owner, _)) if *other != limit => {
                    let message = format!(
                        "lock `{}` has limit {limit} here and {other} in {owner}; expected one limit for a lock, whichever types name it",
                        name.value
                    );
                    let pos = lock.limit.as_ref().map_or(name.pos, |limit| limit.pos);
                    pushes.push(("L6", seq, node, pos, message));
                }
                Some(_) => {}
            }
        }
    }
    for (code, seq, node, pos, message) in pushes {
        let field = if code == "L6" {
            "locks.limit"
        } else {
            "locks.name"
        };
        checker.push(Error, code, seq, node, field, pos, message);
    }
}

/// An error at `pos` in a pool's `field` (`pools.NAME.FIELD`), as check L3.
pub(crate) fn pool_diagnostic(
    pool: &crate::model::Pool,
    pos: Pos,
    field: &str,
    message: String,
) -> Diagnostic {
    Diagnostic {
        severity: Error,
        file: Some(pool.file.to_path_buf()),
        line: Some(pos.line),
        column: Some(pos.column),
        sequence: None,
        node: None,
        field: Some(format!("pools.{}.{field}", pool.name)),
        message,
        code: "L3",
    }
}
