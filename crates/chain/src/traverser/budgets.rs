//! The traverser's side of failure budgets (issue #50; the bookkeeping is
//! [`crate::budgets`]): an element that failed for good is counted, forgiven once nothing
//! of it runs while its node is within its budget, and the first failure past the budget
//! stops new elements (and, with `on_budget_exceeded: stop`, the running ones).

use super::*;

impl Traverser {
    /// Job `idx` failed for good (no retry of it or its sequence is left): its
    /// innermost element failed; a node that can no longer complete fails the element
    /// around it in turn.
    pub(super) fn element_failed(&mut self, idx: JobIdx) {
        let mut at = self.chain.budgets.element_of(idx);
        while let Some(piece) = at {
            let budget = self.chain.budgets.elements[&piece].budget;
            match self.chain.budgets.fail(piece) {
                crate::budgets::Failed::Counted => break,
                crate::budgets::Failed::Exceeded => self.budget_exceeded(budget),
                crate::budgets::Failed::NodeLost => {}
            }
            at = self.chain.budgets.element_of(budget);
        }
        self.settle_element(idx);
    }

    /// After a job of an element ended: once nothing of a failed element (or of one
    /// around it) runs, it is forgiven if its node is within its budget, and what waited
    /// for it may start.
    pub(super) fn settle_element(&mut self, idx: JobIdx) {
        let mut at = self.chain.budgets.element_of(idx);
        while let Some(piece) = at {
            at = self.chain.budgets.outer_of(piece);
            let budgets = &self.chain.budgets;
            if !budgets.has_failed(piece)
                || budgets.elements[&piece]
                    .members
                    .iter()
                    .any(|member| self.running.contains_key(member))
            {
                continue;
            }
            let Some((end, next)) = self.chain.forgive_element(piece) else {
                continue;
            };
            tracing::info!(
                element = %self.chain.element_name(piece),
                "an element failed within its node's failure budget; the others go on"
            );
            if self.mode == Mode::Running {
                if let Some(next) = next {
                    self.dispatch(next);
                }
                self.dispatch(end);
            }
        }
    }

    /// The node whose budget `budget` keeps went past it: its elements that have not
    /// started never will; with `on_budget_exceeded: stop` the running ones are stopped.
    fn budget_exceeded(&mut self, budget: JobIdx) {
        self.chain.drop_waiting_elements(budget);
        let node = &self.chain.budgets.nodes[&budget];
        tracing::warn!(
            node = %node.node,
            failed = node.failed.len(),
            max_failures = node.max_failures.unwrap_or(0),
            stop = node.stop,
            "a node went past its failure budget: no more of its elements start"
        );
        if !node.stop {
            return;
        }
        for piece in self.chain.budgets.started_elements(budget) {
            match self.chain.sequence_started_by(piece) {
                Some(sequence) => self.stop_sequence(sequence),
                None => {
                    if let Some(token) = self.element_cancel.remove(&piece) {
                        token.cancel();
                    }
                }
            }
        }
    }

    /// The token a job starting now runs under: its own, child of its sequence's, when
    /// it is an element of a node that stops its elements past its budget and has no
    /// sequence of its own (else its sequence's).
    pub(super) fn job_cancel_token(&mut self, idx: JobIdx) -> CancellationToken {
        let token = self.cancel_token(self.chain.sequence_of[idx]);
        let budgets = &self.chain.budgets;
        let own = budgets.elements.get(&idx).is_some_and(|element| {
            budgets.nodes[&element.budget].stop && self.chain.sequence_started_by(idx).is_none()
        });
        if !own {
            return token;
        }
        let child = token.child_token();
        self.element_cancel.insert(idx, child.clone());
        child
    }
}
