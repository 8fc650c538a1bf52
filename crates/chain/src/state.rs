//! A chain's state as the traverser keeps it: jobs by index, edges both ways, the three
//! try counters, sequence membership and `parallel` windows. Only the traverser task
//! touches it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::ops::{Index, IndexMut};
use std::sync::Arc;

use proto::{JobArgs, JobChain, State, SuspendedJobChain};

use crate::budgets::{Budget, Budgets};
use crate::incoming::{Incoming, RunJob};
use crate::validate::{self, Adjacent, ValidationError, Waits};

/// A job's place in the chain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct JobIdx(u32);

impl JobIdx {
    pub(crate) fn new(idx: usize) -> JobIdx {
        JobIdx(u32::try_from(idx).expect("a chain has fewer than 2^32 jobs"))
    }

    pub(crate) fn get(self) -> usize {
        self.0 as usize
    }

    /// The index as a number (live output tags tries with it).
    pub(crate) fn raw(self) -> u32 {
        self.0
    }

    pub(crate) fn from_raw(raw: u32) -> JobIdx {
        JobIdx(raw)
    }
}

/// A sequence of the chain, named by its start job (the `sequenceId` of its jobs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Seq(JobIdx);

impl Seq {
    pub(crate) fn start(self) -> JobIdx {
        self.0
    }
}

/// One value per job of the chain.
#[derive(Debug, Clone, Default)]
pub(crate) struct PerJob<T>(Vec<T>);

impl<T> PerJob<T> {
    /// The value of `idx`, if the chain has such a job.
    pub(crate) fn get(&self, idx: JobIdx) -> Option<&T> {
        self.0.get(idx.get())
    }

    fn iter(&self) -> impl Iterator<Item = (JobIdx, &T)> {
        self.0
            .iter()
            .enumerate()
            .map(|(idx, value)| (JobIdx::new(idx), value))
    }
}

impl<T> Index<JobIdx> for PerJob<T> {
    type Output = T;

    fn index(&self, idx: JobIdx) -> &T {
        &self.0[idx.get()]
    }
}

impl<T> IndexMut<JobIdx> for PerJob<T> {
    fn index_mut(&mut self, idx: JobIdx) -> &mut T {
        &mut self.0[idx.get()]
    }
}

impl<T> FromIterator<T> for PerJob<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> PerJob<T> {
        PerJob(iter.into_iter().collect())
    }
}

/// A `parallel` limit: at most `limit` of the pieces (expansions) after a
/// `repeat_<node>_begin` job run at once.
#[derive(Debug, Clone, Default)]
struct Window {
    limit: usize,
    /// Pieces (by their begin job) that have started and not completed.
    active: HashSet<JobIdx>,
    /// Pieces ready to start, in order.
    waiting: VecDeque<JobIdx>,
}

#[derive(Debug)]
pub(crate) struct Chain {
    pub(crate) request_id: String,
    /// The jobs as received, never changed (their `state` and `data` are stale: the
    /// current ones are in `states` and `data`). Shared with runners without copying.
    pub(crate) jobs: PerJob<Arc<RunJob>>,
    states: PerJob<State>,
    pub(crate) data: PerJob<JobArgs>,
    /// Per job: its `retryWait` and `sequenceRetryWait`, parsed when the chain was
    /// accepted.
    pub(crate) waits: PerJob<Waits>,
    pub(crate) succs: Adjacent,
    /// Per job: predecessors not COMPLETE. A PENDING job with 0 is runnable.
    pending_preds: PerJob<u32>,
    pub(crate) finished_jobs: u64,
    /// Per sequence start job: how many times the sequence has started.
    pub(crate) sequence_tries: PerJob<u32>,
    /// Per job: tries in the current sequence try (a try stopped in a retry wait counts,
    /// so that resume gives it back).
    pub(crate) latest_tries: PerJob<u32>,
    /// Per job: tries ever run; the job log's try number.
    pub(crate) total_tries: PerJob<u32>,
    /// Per job: its innermost sequence, if the chain names one.
    pub(crate) sequence_of: PerJob<Option<Seq>>,
    /// Per sequence: the enclosing sequence.
    parent_sequence: HashMap<Seq, Seq>,
    /// Windows by their `repeat_<node>_begin` job.
    windows: HashMap<JobIdx, Window>,
    /// Piece begin job → its window's job.
    window_of_piece: HashMap<JobIdx, JobIdx>,
    /// Piece end job → piece begin job.
    piece_of_end: HashMap<JobIdx, JobIdx>,
    /// Per sequence with a `sequenceTimeout` (by its start job): the bound on each run.
    pub(crate) sequence_timeouts: HashMap<Seq, std::time::Duration>,
    /// The failure budgets of `each:` nodes (issue #50); empty for most chains.
    pub(crate) budgets: Budgets,
}

impl Chain {
    /// The chain to run, from a chain whose `edges` [`validate`] found.
    pub(crate) fn new(
        incoming: Incoming,
        edges: validate::Edges,
        total: BTreeMap<String, u32>,
        latest: BTreeMap<String, u32>,
        sequence: BTreeMap<String, u32>,
    ) -> Result<Chain, ValidationError> {
        let Incoming {
            request_id,
            jobs,
            data,
            finished_jobs,
            ..
        } = incoming;
        let waits = jobs
            .iter()
            .map(|job| validate::waits(job))
            .collect::<Result<PerJob<Waits>, _>>()?;
        let states: PerJob<State> = jobs.iter().map(|job| job.state).collect();
        let jobs = PerJob(jobs);
        // Jobs are in the order of their ids (the map's): a sequence's start job is found
        // by binary search.
        let ids: Vec<&str> = jobs.0.iter().map(|job| job.id.as_str()).collect();
        let mut last_sequence: Option<(&str, Option<Seq>)> = None;
        let validate::Edges { succs, preds } = edges;
        let counter = |map: &BTreeMap<String, u32>| -> PerJob<u32> {
            jobs.iter()
                .map(|(_, job)| map.get(&job.id).copied().unwrap_or(0))
                .collect()
        };
        let sequence_of: PerJob<Option<Seq>> = jobs
            .iter()
            .map(|(_, job)| {
                // Jobs of one sequence are many and often adjacent: the last answer first.
                let id: &str = &job.sequence_id;
                match last_sequence {
                    Some((last, seq)) if last == id => seq,
                    _ => {
                        let seq = validate::index_of(&ids, id).map(Seq);
                        last_sequence = Some((id, seq));
                        seq
                    }
                }
            })
            .collect();
        // A sequence's parent: the sequence of a job that runs just before its start job.
        let mut parent_sequence = HashMap::new();
        for (idx, seq) in sequence_of.iter() {
            if *seq == Some(Seq(idx))
                && let Some(parent) = preds[idx].first().and_then(|&p| sequence_of[p])
                && parent != Seq(idx)
            {
                parent_sequence.insert(Seq(idx), parent);
            }
        }
        let pending_preds = preds
            .iter()
            .map(|(_, ps)| ps.iter().filter(|&&p| states[p] != State::Complete).count() as u32)
            .collect();
        let mut sequence_timeouts = HashMap::new();
        for (idx, job) in jobs.iter() {
            if let Some(timeout) = crate::validate::sequence_timeout(job)? {
                sequence_timeouts.insert(Seq(idx), timeout);
            }
        }
        let mut chain = Chain {
            request_id,
            sequence_tries: counter(&sequence),
            latest_tries: counter(&latest),
            total_tries: counter(&total),
            jobs,
            states,
            data: PerJob(data),
            waits,
            succs,
            pending_preds,
            finished_jobs,
            sequence_of,
            parent_sequence,
            windows: HashMap::new(),
            window_of_piece: HashMap::new(),
            piece_of_end: HashMap::new(),
            sequence_timeouts,
            budgets: Budgets::default(),
        };
        chain.find_windows();
        chain.find_budgets()?;
        Ok(chain)
    }

    /// Every job, in index order.
    pub(crate) fn indices(&self) -> impl Iterator<Item = JobIdx> + use<> {
        (0..self.jobs.0.len()).map(JobIdx::new)
    }

    /// Finds the pieces of every `parallel` window and, for a resumed chain, which of
    /// them had started.
    fn find_windows(&mut self) {
        for window in self.indices() {
            let limit = self.jobs[window].parallel as usize;
            let pieces = self.succs[window].to_vec();
            if limit == 0 || pieces.len() < 2 {
                continue;
            }
            // Pieces are disjoint sub-graphs that meet at the window's end job: the first
            // job on a path from the second piece that is also on a path from the first.
            let first_path: HashSet<JobIdx> =
                self.first_successor_path(pieces[0]).into_iter().collect();
            let Some(window_end) = self
                .first_successor_path(pieces[1])
                .into_iter()
                .find(|j| first_path.contains(j))
            else {
                tracing::warn!(request_id = %self.request_id, job = %self.jobs[window].id, "parallel limit ignored: its expansions do not meet");
                continue;
            };
            let mut ends = Vec::with_capacity(pieces.len());
            for &piece in &pieces {
                let path = self.first_successor_path(piece);
                match path.iter().position(|&j| j == window_end) {
                    Some(at) if at > 0 => ends.push((piece, path[at - 1])),
                    _ => ends.clear(),
                }
                if ends.is_empty() {
                    break;
                }
            }
            if ends.len() != pieces.len() {
                tracing::warn!(request_id = %self.request_id, job = %self.jobs[window].id, "parallel limit ignored: an expansion has no single end");
                continue;
            }
            let mut state = Window {
                limit,
                ..Window::default()
            };
            for (piece, end) in ends {
                self.window_of_piece.insert(piece, window);
                self.piece_of_end.insert(end, piece);
                let started = self.states[piece] != State::Pending;
                if started && self.states[end] != State::Complete {
                    state.active.insert(piece);
                }
            }
            self.windows.insert(window, state);
        }
    }

    /// Finds the elements of every node with a failure budget or waves and, for a
    /// resumed chain, which of them started and failed; forgives those that failed within
    /// their budget.
    fn find_budgets(&mut self) -> Result<(), ValidationError> {
        let fan_outs: Vec<(JobIdx, proto::Elements)> = self
            .indices()
            .filter_map(|idx| Some((idx, (**self.jobs[idx].elements.as_ref()?).clone())))
            .collect();
        if fan_outs.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = self.jobs.0.iter().map(|job| job.id.clone()).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        for (fan_out, elements) in fan_outs {
            let find = |id: &str, what: &str| {
                validate::index_of(&ids, id).ok_or_else(|| {
                    ValidationError::chain(format!(
                        "job {}'s elements name {what} job {id}, which the chain does not have",
                        self.jobs[fan_out].id
                    ))
                })
            };
            let end = find(&elements.end, "end")?;
            let budget = find(&elements.budget, "budget")?;
            let pieces = self.succs[fan_out].to_vec();
            let succs = |idx: JobIdx| self.succs[idx].to_vec();
            self.budgets.add_fan_out(
                fan_out,
                budget,
                || Budget {
                    node: elements.node.clone(),
                    max_failures: elements.max_failures,
                    count: elements.count,
                    stop: elements.stop,
                    failed: Vec::new(),
                },
                &pieces,
                end,
                succs,
            );
        }
        self.budgets.assign_innermost();
        let states = &self.states;
        if let Some(idx) = self.indices().find(|&idx| {
            matches!(states[idx], State::Fail | State::Unknown)
                && self.budgets.element_of(idx).is_none()
        }) {
            let job = &self.jobs[idx];
            return Err(ValidationError::states(format!(
                "invalid job state for existing job chain: {} ({}), job {} (ID {}); all job states must be PENDING, COMPLETE, or STOPPED, or FAIL in an element of a node with a failure budget",
                states[idx],
                states[idx].value(),
                job.name,
                job.id
            )));
        }
        self.budgets.recover(|idx| states[idx]);
        let pieces: Vec<JobIdx> = self.budgets.elements.keys().copied().collect();
        for piece in pieces {
            self.forgive_element(piece);
        }
        Ok(())
    }

    /// Element `piece` failed within its budget and nothing of it runs: the job the
    /// elements meet at stops waiting for it, and its `parallel` slot frees. Returns that
    /// job and the piece to start in the slot, if any (`None` when it is not forgiven).
    pub(crate) fn forgive_element(&mut self, piece: JobIdx) -> Option<(JobIdx, Option<JobIdx>)> {
        let end = self.budgets.forgive(piece)?;
        self.pending_preds[end] -= 1;
        let next = self.window_of_piece.get(&piece).and_then(|window| {
            let window = self.windows.get_mut(window)?;
            window.active.remove(&piece);
            window.waiting.pop_front()
        });
        Some((end, next))
    }

    /// Element `piece` as people name it: its own `each:` values.
    pub(crate) fn element_name(&self, piece: JobIdx) -> String {
        let outer = self
            .budgets
            .elements
            .get(&piece)
            .map_or(&self.jobs[piece].each, |element| {
                &self.jobs[element.fan_out].each
            });
        proto::args::element_name(&self.jobs[piece].each, outer)
    }

    /// A node went past its failure budget: its elements waiting for a `parallel` slot
    /// will not start.
    pub(crate) fn drop_waiting_elements(&mut self, budget: JobIdx) {
        let budgets = &self.budgets;
        for window in self.windows.values_mut() {
            window.waiting.retain(|piece| {
                budgets
                    .elements
                    .get(piece)
                    .is_none_or(|element| element.budget != budget)
            });
        }
    }

    /// The jobs from `start` following first successors to the end of the chain.
    fn first_successor_path(&self, start: JobIdx) -> Vec<JobIdx> {
        let mut path = vec![start];
        let mut at = start;
        while let Some(&next) = self.succs[at].first() {
            path.push(next);
            at = next;
        }
        path
    }

    /// Resume fix-ups (runner.md §11): STOPPED jobs run again, getting back the try they
    /// were stopped on; a stopped sequence start will be counted again when it restarts.
    /// A PENDING job has not run in its sequence's current try, whatever the counters
    /// say (Spin Cycle's example chains carry such counts), so its budget is whole.
    pub(crate) fn prepare_resume(&mut self) {
        for idx in self.indices() {
            if self.states[idx] == State::Pending {
                self.latest_tries[idx] = 0;
            }
            if self.states[idx] != State::Stopped {
                continue;
            }
            self.latest_tries[idx] = self.latest_tries[idx].saturating_sub(1);
            if self.sequence_started_by(idx).is_some() {
                self.sequence_tries[idx] = self.sequence_tries[idx].saturating_sub(1);
            }
            self.set_state(idx, State::Pending);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.jobs.0.len()
    }

    pub(crate) fn state(&self, idx: JobIdx) -> State {
        self.states[idx]
    }

    /// Sets a job's state, keeping `pending_preds` and `finished_jobs` in step.
    pub(crate) fn set_state(&mut self, idx: JobIdx, state: State) {
        let old = self.states[idx];
        if old == state {
            return;
        }
        self.states[idx] = state;
        if old == State::Complete {
            self.finished_jobs -= 1;
            for i in 0..self.succs[idx].len() {
                let succ = self.succs[idx][i];
                self.pending_preds[succ] += 1;
            }
        } else if state == State::Complete {
            self.finished_jobs += 1;
            for i in 0..self.succs[idx].len() {
                let succ = self.succs[idx][i];
                self.pending_preds[succ] -= 1;
            }
        }
    }

    pub(crate) fn is_runnable(&self, idx: JobIdx) -> bool {
        self.states[idx] == State::Pending && self.pending_preds[idx] == 0
    }

    /// The sequence that job `idx` starts, if it is a sequence's start job.
    pub(crate) fn sequence_started_by(&self, idx: JobIdx) -> Option<Seq> {
        (self.sequence_of[idx] == Some(Seq(idx))).then_some(Seq(idx))
    }

    /// Whether job `idx` is part of `sequence` (directly or in a nested one).
    pub(crate) fn in_sequence(&self, idx: JobIdx, sequence: Seq) -> bool {
        self.sequence_of[idx].is_some_and(|seq| self.seq_within(seq, sequence))
    }

    /// Whether `seq` is `sequence` or nested in it.
    pub(crate) fn seq_within(&self, seq: Seq, sequence: Seq) -> bool {
        let mut at = Some(seq);
        while let Some(seq) = at {
            if seq == sequence {
                return true;
            }
            at = self.parent_sequence.get(&seq).copied();
        }
        false
    }

    /// The sequence enclosing `seq`, if any.
    pub(crate) fn parent(&self, seq: Seq) -> Option<Seq> {
        self.parent_sequence.get(&seq).copied()
    }

    /// Every job of a sequence, nested sequences included.
    pub(crate) fn members(&self, sequence: Seq) -> Vec<JobIdx> {
        self.indices()
            .filter(|&idx| self.in_sequence(idx, sequence))
            .collect()
    }

    /// Whether the sequence may run again after a failure: it has started at most
    /// `sequenceRetry` times.
    pub(crate) fn can_retry(&self, sequence: Option<Seq>) -> bool {
        let Some(Seq(start)) = sequence else {
            return false;
        };
        self.sequence_tries[start] >= 1
            && self.sequence_tries[start] <= self.jobs[start].sequence_retry
    }

    /// Puts every job of a sequence back to PENDING for its next try (runner.md §7, but
    /// the whole sequence, and nested sequences' budgets reset too).
    pub(crate) fn reset_sequence(&mut self, sequence: Seq) {
        let members = self.members(sequence);
        if !self.budgets.is_empty() {
            for end in self.budgets.reset(&members) {
                self.pending_preds[end] += 1;
            }
        }
        for idx in members {
            self.set_state(idx, State::Pending);
            self.latest_tries[idx] = 0;
            if idx != sequence.start() && self.sequence_started_by(idx).is_some() {
                self.sequence_tries[idx] = 0;
            }
            if let Some(window) = self.windows.get_mut(&idx) {
                window.active.clear();
                window.waiting.clear();
            }
        }
    }

    /// Whether a runnable job may start now as far as `parallel` windows go: a piece of
    /// a full window waits (in order) for a slot instead, and `false` says so.
    pub(crate) fn enter_window(&mut self, idx: JobIdx) -> bool {
        let Some(window_idx) = self.window_of_piece.get(&idx) else {
            return true;
        };
        let window = self
            .windows
            .get_mut(window_idx)
            .expect("pieces belong to windows");
        if window.active.contains(&idx) {
            return true;
        }
        if window.active.len() >= window.limit {
            if !window.waiting.contains(&idx) {
                window.waiting.push_back(idx);
            }
            return false;
        }
        window.active.insert(idx);
        true
    }

    /// A completed piece end frees its window's slot; returns the piece to start next.
    pub(crate) fn leave_window(&mut self, end: JobIdx) -> Option<JobIdx> {
        let piece = *self.piece_of_end.get(&end)?;
        let window_idx = self.window_of_piece.get(&piece)?;
        let window = self
            .windows
            .get_mut(window_idx)
            .expect("pieces belong to windows");
        window.active.remove(&piece);
        window.waiting.pop_front()
    }

    /// Forgets the waiting pieces of `sequence` (it is being reset).
    pub(crate) fn forget_waiting_in(&mut self, sequence: Seq) {
        let forget: HashSet<JobIdx> = self
            .windows
            .values()
            .flat_map(|window| window.waiting.iter().copied())
            .filter(|&piece| self.in_sequence(piece, sequence))
            .collect();
        for window in self.windows.values_mut() {
            window.waiting.retain(|piece| !forget.contains(piece));
        }
    }

    /// Copies a completed job's data into each successor's (runner.md §8).
    pub(crate) fn pass_data(&mut self, idx: JobIdx) {
        if self.data[idx].is_empty() {
            return;
        }
        let data = self.data[idx].clone();
        for i in 0..self.succs[idx].len() {
            let succ = self.succs[idx][i];
            for (key, value) in &data {
                self.data[succ].insert(key.clone(), value.clone());
            }
        }
    }

    fn counters(&self, values: &PerJob<u32>) -> BTreeMap<String, u32> {
        values
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(idx, n)| (self.jobs[idx].id.clone(), *n))
            .collect()
    }

    /// The chain as it stands (states, data, finished jobs), with the given chain state.
    pub(crate) fn job_chain(&self, state: State) -> JobChain {
        JobChain {
            request_id: self.request_id.clone(),
            jobs: self
                .jobs
                .iter()
                .map(|(idx, job)| {
                    let job = job.to_proto(self.states[idx], self.data[idx].clone());
                    (job.id.clone(), job)
                })
                .collect(),
            adjacency_list: self
                .succs
                .iter()
                .filter(|(_, succs)| !succs.is_empty())
                .map(|(idx, succs)| {
                    let ids = succs.iter().map(|&s| self.jobs[s].id.clone()).collect();
                    (self.jobs[idx].id.clone(), ids)
                })
                .collect(),
            state,
            finished_jobs: self.finished_jobs,
        }
    }

    /// The chain and its try counters, to resume elsewhere.
    pub(crate) fn suspended(&self) -> SuspendedJobChain {
        SuspendedJobChain {
            request_id: self.request_id.clone(),
            job_chain: self.job_chain(State::Suspended),
            total_job_tries: self.counters(&self.total_tries),
            latest_run_job_tries: self.counters(&self.latest_tries),
            sequence_tries: self.counters(&self.sequence_tries),
        }
    }
}
