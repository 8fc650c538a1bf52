//! The checks of a request type's `locks:` (issue #34): each names a lock, keys it by one
//! of the type's args, allows at least one holder and a policy that exists; a lock is
//! named once per type, every type naming it agrees on its limit, and a fair lock is fair
//! by the caller or by an arg.

use super::*;
use crate::model::WhenTaken;

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
        let mut named: HashMap<&str, Pos> = HashMap::new();
        for lock in &seq.locks {
            let Some(name) = lock
                .name
                .as_ref()
                .filter(|name| !name.value.trim().is_empty())
            else {
                let message = "lock has no `name`; expected the name of the lock, shared by every type that names it".to_owned();
                self.push(Error, "L1", seq, None, "locks.name", lock.pos, message);
                continue;
            };
            if let Some(first) = named.insert(&name.value, name.pos) {
                let message = format!(
                    "lock `{}` is declared twice (first at line {}); expected each lock once per type",
                    name.value, first.line
                );
                self.push(Error, "L7", seq, None, "locks.name", name.pos, message);
            }
            if let Some(key) = &lock.key
                && !args.contains(&key.value.as_str())
            {
                let message = format!(
                    "lock `{}` is keyed by `{}`, which is not an arg of `{}`{}; expected one of its args: {}",
                    name.value,
                    key.value,
                    seq.name,
                    crate::near::did_you_mean(&key.value, args.iter().copied()),
                    quoted(args.iter().copied())
                );
                self.push(Error, "L2", seq, None, "locks.key", key.pos, message);
            }
            if let Some(fair_by) = &lock.fair_by
                && fair_by.value != "user"
                && !args.contains(&fair_by.value.as_str())
            {
                let choices = std::iter::once("user").chain(args.iter().copied());
                let message = format!(
                    "lock `{}` is fair by `{}`, which is neither `user` nor an arg of `{}`{}; expected `user` (the caller) or one of its args: {}",
                    name.value,
                    fair_by.value,
                    seq.name,
                    crate::near::did_you_mean(&fair_by.value, choices.clone()),
                    quoted(choices)
                );
                self.push(
                    Error,
                    "L8",
                    seq,
                    None,
                    "locks.fair_by",
                    fair_by.pos,
                    message,
                );
            }
            if let Some(limit) = lock.limit.as_ref().filter(|limit| limit.value < 1) {
                let message = format!(
                    "lock `{}` has `limit: {}`; expected at least 1 (1 is a mutex, n lets n requests hold it at once)",
                    name.value, limit.value
                );
                self.push(Error, "L3", seq, None, "locks.limit", limit.pos, message);
            }
            if let Some(when) = &lock.when_taken
                && WhenTaken::parse(&when.value).is_none()
            {
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
                    None,
                    "locks.when_taken",
                    when.pos,
                    message,
                );
            }
        }
    }
}

/// L6: every request type naming a lock gives it the same limit (the first one met, in
/// the specs' order, is the one the others are measured against).
pub(super) fn lock_limits_agree(checker: &mut Checker<'_>) {
    let mut first: HashMap<String, (u32, String)> = HashMap::new();
    for seq in checker.specs.sequences() {
        for lock in &seq.locks {
            let Some(name) = &lock.name else { continue };
            let limit = lock.limit();
            match first.get(&name.value) {
                None => {
                    first.insert(name.value.clone(), (limit, seq.name.clone()));
                }
                Some((other, owner)) if *other != limit => {
                    let message = format!(
                        "lock `{}` has limit {limit} here and {other} in `{owner}`; expected one limit for a lock, whichever types name it",
                        name.value
                    );
                    let pos = lock.limit.as_ref().map_or(name.pos, |limit| limit.pos);
                    checker.push(Error, "L6", seq, None, "locks.limit", pos, message);
                }
                Some(_) => {}
            }
        }
    }
}
