//! Failure budgets of `each:` nodes (issue #50), as the traverser keeps them: which job
//! keeps each node's count, the elements (the sub-graph after a fan-out job, up to where
//! the elements meet) and the jobs in each, which elements failed, and whether a node is
//! past its budget. Pure bookkeeping: the traverser decides what to start and stop.
//!
//! An element fails when a job of it fails for good (after its retries and its
//! sequence's). While a node's failed elements are within its budget, each, once nothing
//! of it runs, is *forgiven*: the job the elements meet at stops waiting for it, so the
//! node completes when the others have. The first failure past the budget is not
//! forgiven (the node cannot complete) and no element of the node starts from then on.
//! Everything here is found again from the jobs' states when a chain is resumed, so a
//! recovered chain neither forgets a failure nor starts an element twice.

use std::collections::{HashMap, VecDeque};

use proto::State;

use crate::state::JobIdx;

/// A node's failure budget.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    pub(crate) node: String,
    /// Elements that may fail with the node still completing; `None`: Spin Cycle's way
    /// (any failure fails the node, the others running on).
    pub(crate) max_failures: Option<u32>,
    pub(crate) count: u32,
    /// Stop the running elements once past the budget.
    pub(crate) stop: bool,
    /// The failed elements (their first jobs), in the order they failed.
    pub(crate) failed: Vec<JobIdx>,
}

impl Budget {
    pub(crate) fn exceeded(&self) -> bool {
        self.max_failures
            .is_some_and(|max| self.failed.len() as u64 > u64::from(max))
    }
}

/// What became of an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Running, waiting or done: nothing of it failed for good.
    Open,
    /// Failed for good; forgiven once nothing of it runs if it was within the budget.
    Failed { within: bool },
    /// Failed within the budget, and the job the elements meet at no longer waits for it.
    Forgiven,
}

#[derive(Debug, Clone)]
pub(crate) struct Element {
    /// The job it fans out from.
    pub(crate) fan_out: JobIdx,
    /// The job keeping its node's budget.
    pub(crate) budget: JobIdx,
    /// Where the elements meet.
    pub(crate) end: JobIdx,
    /// Its jobs, its first job first.
    pub(crate) members: Vec<JobIdx>,
    /// Whether it has started (a node past its budget starts no new element).
    pub(crate) started: bool,
    fate: Fate,
}

/// What the traverser must do after an element failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failed {
    /// Counted already, or counted within the budget (forgiven once nothing of it runs).
    Counted,
    /// This failure took its node past its budget: no new element starts.
    Exceeded,
    /// This failure fails its node, which has no budget (Spin Cycle's way: the others
    /// run on).
    NodeLost,
}

#[derive(Debug, Default)]
pub(crate) struct Budgets {
    /// By the job that keeps each node's count (`Elements::budget`).
    pub(crate) nodes: HashMap<JobIdx, Budget>,
    /// By each element's first job.
    pub(crate) elements: HashMap<JobIdx, Element>,
    /// Per job inside an element: the innermost element's first job (an element of a
    /// node inside another node's element is inside that one too).
    element_of: HashMap<JobIdx, JobIdx>,
}

impl Budgets {
    pub(crate) fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Adds the elements after fan-out job `fan_out` (its successors `pieces`), which
    /// meet at `end`, to the budget `budget` keeps (made from `make` the first time). The
    /// jobs of each element are those reached from its first job before `end`.
    pub(crate) fn add_fan_out(
        &mut self,
        fan_out: JobIdx,
        budget: JobIdx,
        make: impl FnOnce() -> Budget,
        pieces: &[JobIdx],
        end: JobIdx,
        succs: impl Fn(JobIdx) -> Vec<JobIdx>,
    ) {
        self.nodes.entry(budget).or_insert_with(make);
        for &piece in pieces {
            let mut members = vec![piece];
            let mut queue = VecDeque::from([piece]);
            let mut seen = std::collections::HashSet::from([piece]);
            while let Some(at) = queue.pop_front() {
                for next in succs(at) {
                    if next != end && seen.insert(next) {
                        members.push(next);
                        queue.push_back(next);
                    }
                }
            }
            self.elements.insert(
                piece,
                Element {
                    fan_out,
                    budget,
                    end,
                    members,
                    started: false,
                    fate: Fate::Open,
                },
            );
        }
    }

    /// Once every fan-out is added: each job's innermost element (the smallest that
    /// holds it).
    pub(crate) fn assign_innermost(&mut self) {
        let mut by_size: Vec<(&JobIdx, &Element)> = self.elements.iter().collect();
        by_size.sort_by_key(|(piece, element)| (std::cmp::Reverse(element.members.len()), **piece));
        for (&piece, element) in by_size {
            for &member in &element.members {
                self.element_of.insert(member, piece);
            }
        }
    }

    /// The innermost element job `idx` belongs to (its first job).
    pub(crate) fn element_of(&self, idx: JobIdx) -> Option<JobIdx> {
        self.element_of.get(&idx).copied()
    }

    /// The element that holds element `piece`'s node (`None` at the top).
    pub(crate) fn outer_of(&self, piece: JobIdx) -> Option<JobIdx> {
        self.element_of(self.elements.get(&piece)?.fan_out)
    }

    /// Whether element `piece` may start: always, unless its node is past its budget
    /// and it never started.
    pub(crate) fn may_start(&self, piece: JobIdx) -> bool {
        self.elements
            .get(&piece)
            .is_none_or(|element| element.started || !self.nodes[&element.budget].exceeded())
    }

    /// Element `piece` (if it is one) starts.
    pub(crate) fn started(&mut self, piece: JobIdx) {
        if let Some(element) = self.elements.get_mut(&piece) {
            element.started = true;
        }
    }

    /// The elements of the budget `budget` keeps that have started.
    pub(crate) fn started_elements(&self, budget: JobIdx) -> Vec<JobIdx> {
        self.elements
            .iter()
            .filter(|(_, element)| element.budget == budget && element.started)
            .map(|(&piece, _)| piece)
            .collect()
    }

    /// Element `piece` failed for good: counted once against its node's budget.
    pub(crate) fn fail(&mut self, piece: JobIdx) -> Failed {
        let Some(element) = self.elements.get_mut(&piece) else {
            return Failed::Counted;
        };
        if element.fate != Fate::Open {
            return Failed::Counted;
        }
        let budget = self
            .nodes
            .get_mut(&element.budget)
            .expect("elements belong to budgets");
        let was_exceeded = budget.exceeded();
        budget.failed.push(piece);
        let within = budget
            .max_failures
            .is_some_and(|max| budget.failed.len() as u64 <= u64::from(max));
        element.fate = Fate::Failed { within };
        if !was_exceeded && budget.exceeded() {
            Failed::Exceeded
        } else if budget.max_failures.is_none() && budget.failed.len() == 1 {
            Failed::NodeLost
        } else {
            Failed::Counted
        }
    }

    /// Whether element `piece` failed within its budget and is not forgiven yet; marks
    /// it forgiven and returns its end (whose wait for it the caller takes back).
    pub(crate) fn forgive(&mut self, piece: JobIdx) -> Option<JobIdx> {
        let element = self.elements.get_mut(&piece)?;
        if element.fate != (Fate::Failed { within: true }) {
            return None;
        }
        element.fate = Fate::Forgiven;
        Some(element.end)
    }

    /// Whether job `idx` is in an element (or an element around that one) that failed
    /// within its budget (so its state does not fail the chain).
    pub(crate) fn is_forgiven(&self, idx: JobIdx) -> bool {
        let mut at = self.element_of(idx);
        while let Some(piece) = at {
            if self.elements[&piece].fate == Fate::Forgiven {
                return true;
            }
            at = self.outer_of(piece);
        }
        false
    }

    /// Whether element `piece` has failed (forgiven or not).
    pub(crate) fn has_failed(&self, piece: JobIdx) -> bool {
        self.elements
            .get(&piece)
            .is_some_and(|element| element.fate != Fate::Open)
    }

    /// Forgets what happened to the elements and budgets among `jobs` (a sequence
    /// holding them is being reset for a retry); returns the ends whose waits for
    /// forgiven elements come back.
    pub(crate) fn reset(&mut self, jobs: &[JobIdx]) -> Vec<JobIdx> {
        let mut ends = Vec::new();
        for idx in jobs {
            if let Some(budget) = self.nodes.get_mut(idx) {
                budget.failed.clear();
            }
            if let Some(element) = self.elements.get_mut(idx) {
                if element.fate == Fate::Forgiven {
                    ends.push(element.end);
                }
                element.fate = Fate::Open;
                element.started = false;
            }
        }
        ends
    }

    /// Finds, from the jobs' states of a resumed chain, which elements started and which
    /// failed (in index order, which is as good an order as any once they all have).
    pub(crate) fn recover(&mut self, state: impl Fn(JobIdx) -> State) {
        let mut pieces: Vec<JobIdx> = self.elements.keys().copied().collect();
        pieces.sort_unstable();
        for piece in pieces {
            let element = self.elements.get_mut(&piece).expect("listed above");
            element.started = element
                .members
                .iter()
                .any(|&idx| state(idx) != State::Pending);
        }
        // A failed job fails its innermost element; a node that cannot complete fails
        // the element around it in turn.
        let mut failed: Vec<JobIdx> = self
            .element_of
            .keys()
            .copied()
            .filter(|&idx| matches!(state(idx), State::Fail | State::Unknown))
            .collect();
        failed.sort_unstable();
        for idx in failed {
            let mut at = self.element_of(idx);
            while let Some(piece) = at {
                match self.fail(piece) {
                    Failed::Counted => break,
                    Failed::Exceeded | Failed::NodeLost => {
                        at = self.element_of(self.elements[&piece].budget);
                    }
                }
            }
        }
    }

    /// The failure past its budget of some node, as the request's error: the node, how
    /// many of its elements failed, its budget, and which (named by `name`).
    pub(crate) fn exceeded_error(&self, name: impl Fn(JobIdx) -> String) -> Option<String> {
        let mut exceeded: Vec<&Budget> = self.nodes.values().filter(|b| b.exceeded()).collect();
        exceeded.sort_by(|a, b| a.node.cmp(&b.node));
        let texts: Vec<String> = exceeded
            .into_iter()
            .map(|budget| {
                let names: Vec<String> = budget.failed.iter().map(|&piece| name(piece)).collect();
                format!(
                    "node {}: {} of {} elements failed, past its budget of {}: {}",
                    budget.node,
                    budget.failed.len(),
                    budget.count,
                    budget.max_failures.unwrap_or(0),
                    names.join(", ")
                )
            })
            .collect();
        (!texts.is_empty()).then(|| texts.join("; "))
    }
}
