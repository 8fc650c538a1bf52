//! Joining a node's iterations: none, one, many side by side between `repeat_`
//! wrappers (with `parallel`), and, for a node with a failure budget or waves (issue
//! #50), its elements split into waves with their waits and approvals, every fan-out
//! job told where its elements meet and which job keeps the budget.

use proto::JobArgs;
use serde_json::Value;
use spec::{Node, Sequence};

use super::{Builder, NewJob, Piece, Place};
use crate::{Error, names};

impl Builder<'_> {
    /// The piece of a node from the pieces of its iterations: a noop pair for none, the
    /// one itself, or many side by side between `repeat_` wrappers (with its `parallel`);
    /// a node with a failure budget or waves always has its `repeat_` wrappers
    /// ([`Builder::rollout`]).
    pub(super) fn join_iterations(
        &mut self,
        seq: &Sequence,
        node: &Node,
        iteration_pieces: &[Piece],
    ) -> Result<Piece, Error> {
        let place = Place {
            sequence: &seq.name,
            node: &node.name,
        };
        let rollout = node.max_failures.is_some() || !node.waves.is_empty();
        match iteration_pieces {
            [] => {
                let pair = self.wrappers(place, &names::noop_place(&node.name))?;
                self.edge(pair.begin, pair.end);
                Ok(pair)
            }
            [one] if !rollout => Ok(*one),
            many if rollout => self.rollout(place, node, many),
            many => {
                let outer = self.wrappers(place, &names::repeat_place(&node.name))?;
                self.fan_out(outer, many, node);
                Ok(outer)
            }
        }
    }

    /// Edges from `around.begin` to each piece and from each to `around.end`, with the
    /// node's `parallel` on the begin job when it limits anything.
    fn fan_out(&mut self, around: Piece, pieces: &[Piece], node: &Node) {
        for piece in pieces {
            self.edge(around.begin, piece.begin);
            self.edge(piece.end, around.end);
        }
        if let Some(parallel) = node.parallel.as_ref().map(|p| p.value)
            && (parallel as usize) < pieces.len()
        {
            self.jobs[around.begin].parallel = parallel;
        }
    }

    /// A node with `max_failures:` or `waves:` (issue #50): its elements between
    /// `repeat_` wrappers, split into waves — each between `wave_<node>_<k>` wrappers,
    /// after the one before it, its `wave_wait` (a `sleep` job) and its approval (an
    /// `approval` job) — and every fan-out job told where its elements meet and which job
    /// keeps the node's failure budget.
    fn rollout(&mut self, place: Place<'_>, node: &Node, pieces: &[Piece]) -> Result<Piece, Error> {
        let outer = self.wrappers(place, &names::repeat_place(&node.name))?;
        let count = pieces.len();
        let ends = wave_ends(node, count);
        let budget = proto::Elements {
            node: node.name.clone(),
            end: String::new(),
            budget: self.jobs[outer.begin].id.clone(),
            max_failures: node
                .max_failures
                .as_ref()
                .map(|share| share.value.floor_of(count) as u32),
            count: count as u32,
            stop: node
                .on_budget_exceeded
                .as_ref()
                .is_some_and(|on| on.value == "stop"),
            wave: 0,
            waves: 0,
        };
        if ends.len() <= 1 {
            self.fan_out(outer, pieces, node);
            self.jobs[outer.begin].elements = Some(Box::new(proto::Elements {
                end: self.jobs[outer.end].id.clone(),
                ..budget
            }));
            return Ok(outer);
        }
        let list = node
            .each_pairs()
            .next()
            .map_or("elements", |(list, _)| list);
        let waves = ends.len();
        let mut after = outer.begin;
        let mut from = 0;
        for (k, &to) in ends.iter().enumerate() {
            let number = k + 1;
            if k > 0 {
                if let Some(wait) = &node.wave_wait {
                    let name = names::wave_wait(&node.name, number);
                    let mut args = JobArgs::new();
                    args.insert("duration".to_owned(), Value::String(wait.value.clone()));
                    let wait = self.job(NewJob::builtin(place, job::SLEEP, &name), &mut args)?;
                    self.edge(after, wait);
                    after = wait;
                }
                if let Some(roles) = &node.wave_approval {
                    let name = names::wave_approval(&node.name, number);
                    let mut args = JobArgs::new();
                    let message = format!("wave {number} of {waves}: {} {list}", to - from);
                    args.insert("message".to_owned(), Value::String(message));
                    if !roles.value.is_empty() {
                        let roles = roles.value.iter().cloned().map(Value::String).collect();
                        args.insert("roles".to_owned(), Value::Array(roles));
                    }
                    let approval =
                        self.job(NewJob::builtin(place, job::APPROVAL, &name), &mut args)?;
                    self.edge(after, approval);
                    after = approval;
                }
            }
            let wave = self.wrappers(place, &names::wave_place(&node.name, number))?;
            self.edge(after, wave.begin);
            self.fan_out(wave, &pieces[from..to], node);
            self.jobs[wave.begin].elements = Some(Box::new(proto::Elements {
                end: self.jobs[wave.end].id.clone(),
                wave: number as u32,
                waves: waves as u32,
                ..budget.clone()
            }));
            after = wave.end;
            from = to;
        }
        self.edge(after, outer.end);
        Ok(outer)
    }
}

/// Where each of a node's waves ends among its `count` elements (cumulative, each past
/// the one before; a size no larger than the one before adds no wave): `[count]` without
/// `waves:`, and the elements past the last wave written run as one more wave.
pub(crate) fn wave_ends(node: &Node, count: usize) -> Vec<usize> {
    let mut ends: Vec<usize> = Vec::new();
    for wave in &node.waves {
        let end = wave.value.ceil_of(count);
        if end > ends.last().copied().unwrap_or(0) {
            ends.push(end);
        }
    }
    if ends.last().copied().unwrap_or(0) < count {
        ends.push(count);
    }
    ends
}
