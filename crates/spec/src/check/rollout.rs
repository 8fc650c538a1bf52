//! The checks of a node's rollout fields (issue #50): `max_failures`,
//! `on_budget_exceeded`, `waves`, `wave_wait` and `wave_approval` go with `each:`, their
//! percentages lie within 0–100%, waves grow, and an approval between waves does not wait
//! holding locks.

use super::*;
use crate::model::Share;

/// Spindle's code for every rollout diagnostic.
const CODE: &str = "rollout";

impl Checker<'_> {
    pub(super) fn node_rollout(&mut self, seq: &Sequence, node: &Node) {
        let n = Some(node);
        let each = !node.each.is_empty();
        if let Some(budget) = &node.max_failures {
            if !each {
                let message = without_each("max_failures");
                self.push(Error, CODE, seq, n, "max_failures", budget.pos, message);
            }
            if let Some(message) = percent_problem(budget.value, false) {
                self.push(Error, CODE, seq, n, "max_failures", budget.pos, message);
            }
        }
        if let Some(on) = &node.on_budget_exceeded {
            if !matches!(on.value.as_str(), "stop" | "finish") {
                let message = format!(
                    "invalid `on_budget_exceeded` `{}`; expected `stop` (stop the running elements) or `finish` (let them finish, the default)",
                    on.value
                );
                self.push(Error, CODE, seq, n, "on_budget_exceeded", on.pos, message);
            }
            if node.max_failures.is_none() {
                let message = "`on_budget_exceeded` is set without `max_failures`; expected `max_failures: N` or `P%` with it".to_owned();
                self.push(Error, CODE, seq, n, "on_budget_exceeded", on.pos, message);
            }
        }
        self.waves(seq, node, each);
    }

    fn waves(&mut self, seq: &Sequence, node: &Node, each: bool) {
        let n = Some(node);
        if let Some(first) = node.waves.first()
            && !each
        {
            let message = without_each("waves");
            self.push(Error, CODE, seq, n, "waves", first.pos, message);
        }
        if node.waves.is_empty() && node.field_pos.contains_key("waves") {
            let message =
                "`waves` is empty; expected the waves' cumulative sizes, such as [1, 10%, 100%]"
                    .to_owned();
            self.push(Error, CODE, seq, n, "waves", node.pos_of("waves"), message);
        }
        for wave in &node.waves {
            if let Some(message) = percent_problem(wave.value, true) {
                self.push(Error, CODE, seq, n, "waves", wave.pos, message);
            }
        }
        // Sizes are cumulative: each larger than the one before it (a count and a
        // percentage compare only once the elements are known).
        for pair in node.waves.windows(2) {
            let (before, after) = (pair[0].value, pair[1].value);
            let grows = match (before, after) {
                (Share::Count(a), Share::Count(b)) => b > a,
                (Share::Percent(a), Share::Percent(b)) => b > a,
                (Share::Count(_), Share::Percent(_)) => true,
                (Share::Percent(_), Share::Count(_)) => true,
            };
            if !grows {
                let message = format!(
                    "wave `{after}` follows `{before}`; expected each wave's cumulative size larger than the one before it (such as [1, 10%, 50%, 100%])"
                );
                self.push(Error, CODE, seq, n, "waves", pair[1].pos, message);
            }
        }
        let waves = !node.waves.is_empty();
        if let Some(wait) = &node.wave_wait {
            if !waves {
                let message = "`wave_wait` is set without `waves`; expected `waves: [...]` with it"
                    .to_owned();
                self.push(Error, CODE, seq, n, "wave_wait", wait.pos, message);
            }
            if let Err(err) = proto::duration::parse(&wait.value) {
                let message =
                    format!("invalid `wave_wait`: {err}; expected a Go duration such as 30s or 5m");
                self.push(Error, CODE, seq, n, "wave_wait", wait.pos, message);
            }
        }
        let Some(approval) = &node.wave_approval else {
            return;
        };
        if !waves {
            let message = "`wave_approval` is set without `waves`; expected `waves: [...]` with it"
                .to_owned();
            self.push(Error, CODE, seq, n, "wave_approval", approval.pos, message);
        }
        // An approval waits for a person: locks held meanwhile hold up every request
        // queued on them.
        let held: Vec<&str> = seq
            .locks
            .iter()
            .chain(&node.locks)
            .filter_map(|lock| lock.name.as_ref().map(|name| name.value.as_str()))
            .collect();
        if !held.is_empty() {
            let message = format!(
                "`wave_approval` waits for a person while {} {} held; expected a node without locks in a sequence without locks (requests queued on them wait as long as the approval does)",
                quoted(held.iter().copied()),
                if held.len() == 1 { "is" } else { "are" },
            );
            self.push(
                Warning,
                CODE,
                seq,
                n,
                "wave_approval",
                approval.pos,
                message,
            );
        }
    }
}

/// A rollout field on a node that expands over no list.
fn without_each(field: &str) -> String {
    format!(
        "`{field}` is set without `each`; expected `each: [list:element]` (it applies to a node's elements)"
    )
}

/// Why a share is out of range: a percentage outside 0–100% (above 0 for a wave), a wave
/// of 0 elements.
fn percent_problem(share: Share, wave: bool) -> Option<String> {
    match share {
        Share::Percent(p) if !(0.0..=100.0).contains(&p) || (wave && p <= 0.0) => Some(format!(
            "`{share}` is not a share of the elements; expected a percentage {}",
            if wave {
                "above 0% and at most 100%"
            } else {
                "from 0% to 100%"
            }
        )),
        Share::Count(0) if wave => {
            Some("a wave of 0 elements; expected a cumulative size of at least 1".to_owned())
        }
        _ => None,
    }
}
