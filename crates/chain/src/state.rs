//! A chain's state as the traverser keeps it: jobs by index, edges both ways, the three
//! try counters, sequence membership and `parallel` windows. Only the traverser task
//! touches it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use std::sync::Arc;

use proto::{JobArgs, JobChain, State, SuspendedJobChain};

use crate::validate::{self, ValidationError, Waits};

/// A `parallel` limit: at most `limit` of the pieces (expansions) after a
/// `repeat_<node>_begin` job run at once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Window {
    pub(crate) limit: usize,
    /// Pieces (by their begin job) that have started and not completed.
    pub(crate) active: HashSet<usize>,
    /// Pieces ready to start, in order.
    pub(crate) waiting: VecDeque<usize>,
}

#[derive(Debug)]
pub(crate) struct Chain {
    pub(crate) request_id: String,
    /// The jobs as received, never changed (their `state` and `data` are stale: the
    /// current ones are in `states` and `data`). Shared with runners without copying.
    pub(crate) jobs: Vec<Arc<proto::Job>>,
    pub(crate) states: Vec<State>,
    pub(crate) data: Vec<JobArgs>,
    /// Per job: its `retryWait` and `sequenceRetryWait`, parsed when the chain was
    /// accepted.
    pub(crate) waits: Vec<Waits>,
    pub(crate) succs: Vec<Vec<usize>>,
    /// Per job: predecessors not COMPLETE. A PENDING job with 0 is runnable.
    pub(crate) pending_preds: Vec<u32>,
    pub(crate) finished_jobs: u64,
    /// Per sequence start job: how many times the sequence has started.
    pub(crate) sequence_tries: Vec<u32>,
    /// Per job: tries in the current sequence try (a try stopped in a retry wait counts,
    /// so that resume gives it back).
    pub(crate) latest_tries: Vec<u32>,
    /// Per job: tries ever run; the job log's try number.
    pub(crate) total_tries: Vec<u32>,
    /// Per job: its innermost sequence's start job, if the chain names one.
    pub(crate) sequence_of: Vec<Option<usize>>,
    /// Per sequence start job: the enclosing sequence's start job.
    pub(crate) parent_sequence: HashMap<usize, usize>,
    /// Windows by their `repeat_<node>_begin` job.
    pub(crate) windows: HashMap<usize, Window>,
    /// Piece begin job → its window's job.
    pub(crate) window_of_piece: HashMap<usize, usize>,
    /// Piece end job → piece begin job.
    pub(crate) piece_of_end: HashMap<usize, usize>,
}

impl Chain {
    pub(crate) fn new(
        job_chain: JobChain,
        total: BTreeMap<String, u32>,
        latest: BTreeMap<String, u32>,
        sequence: BTreeMap<String, u32>,
    ) -> Result<Chain, ValidationError> {
        let JobChain {
            request_id,
            jobs,
            adjacency_list,
            finished_jobs,
            ..
        } = job_chain;
        // Straight from the map into shared jobs: no intermediate vector of large jobs.
        let n = jobs.len();
        let (mut states, mut data, mut waits, mut shared) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for mut job in jobs.into_values() {
            waits.push(validate::waits(&job)?);
            states.push(job.state);
            data.push(std::mem::take(&mut job.data));
            shared.push(Arc::new(job));
        }
        let jobs: Vec<Arc<proto::Job>> = shared;
        let index: HashMap<&str, usize> = jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.id.as_str(), i))
            .collect();
        let mut succs = vec![Vec::new(); n];
        let mut preds = vec![Vec::new(); n];
        for (from, tos) in &adjacency_list {
            let Some(&from) = index.get(from.as_str()) else {
                continue;
            };
            for to in tos {
                if let Some(&to) = index.get(to.as_str()) {
                    succs[from].push(to);
                    preds[to].push(from);
                }
            }
        }
        let counter = |map: &BTreeMap<String, u32>| -> Vec<u32> {
            jobs.iter()
                .map(|job| map.get(&job.id).copied().unwrap_or(0))
                .collect()
        };
        let sequence_of: Vec<Option<usize>> = jobs
            .iter()
            .map(|job| index.get(job.sequence_id.as_str()).copied())
            .collect();
        // A sequence's parent: the sequence of a job that runs just before its start job.
        let mut parent_sequence = HashMap::new();
        for (idx, seq) in sequence_of.iter().enumerate() {
            if *seq == Some(idx)
                && let Some(parent) = preds[idx].first().and_then(|&p| sequence_of[p])
                && parent != idx
            {
                parent_sequence.insert(idx, parent);
            }
        }
        let pending_preds = preds
            .iter()
            .map(|ps| ps.iter().filter(|&&p| states[p] != State::Complete).count() as u32)
            .collect();
        let mut chain = Chain {
            request_id,
            sequence_tries: counter(&sequence),
            latest_tries: counter(&latest),
            total_tries: counter(&total),
            jobs,
            states,
            data,
            waits,
            succs,
            pending_preds,
            finished_jobs,
            sequence_of,
            parent_sequence,
            windows: HashMap::new(),
            window_of_piece: HashMap::new(),
            piece_of_end: HashMap::new(),
        };
        chain.find_windows();
        Ok(chain)
    }

    /// Finds the pieces of every `parallel` window and, for a resumed chain, which of
    /// them had started.
    fn find_windows(&mut self) {
        for window in 0..self.jobs.len() {
            let limit = self.jobs[window].parallel as usize;
            let pieces = self.succs[window].clone();
            if limit == 0 || pieces.len() < 2 {
                continue;
            }
            // Pieces are disjoint sub-graphs that meet at the window's end job: the first
            // job on a path from the second piece that is also on a path from the first.
            let first_path: HashSet<usize> =
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

    /// The jobs from `start` following first successors to the end of the chain.
    fn first_successor_path(&self, start: usize) -> Vec<usize> {
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
        for idx in 0..self.jobs.len() {
            if self.states[idx] == State::Pending {
                self.latest_tries[idx] = 0;
            }
            if self.states[idx] != State::Stopped {
                continue;
            }
            self.latest_tries[idx] = self.latest_tries[idx].saturating_sub(1);
            if self.is_sequence_start(idx) {
                self.sequence_tries[idx] = self.sequence_tries[idx].saturating_sub(1);
            }
            self.set_state(idx, State::Pending);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.jobs.len()
    }

    pub(crate) fn state(&self, idx: usize) -> State {
        self.states[idx]
    }

    /// Sets a job's state, keeping `pending_preds` and `finished_jobs` in step.
    pub(crate) fn set_state(&mut self, idx: usize, state: State) {
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

    pub(crate) fn is_runnable(&self, idx: usize) -> bool {
        self.states[idx] == State::Pending && self.pending_preds[idx] == 0
    }

    pub(crate) fn is_sequence_start(&self, idx: usize) -> bool {
        self.sequence_of[idx] == Some(idx)
    }

    /// Whether job `idx` is part of sequence `sequence` (directly or in a nested one).
    pub(crate) fn in_sequence(&self, idx: usize, sequence: usize) -> bool {
        let mut at = self.sequence_of[idx];
        while let Some(seq) = at {
            if seq == sequence {
                return true;
            }
            at = self.parent_sequence.get(&seq).copied();
        }
        false
    }

    /// Every job of a sequence, nested sequences included.
    pub(crate) fn members(&self, sequence: usize) -> Vec<usize> {
        (0..self.jobs.len())
            .filter(|&idx| self.in_sequence(idx, sequence))
            .collect()
    }

    /// Whether the sequence may run again after a failure: it has started at most
    /// `sequenceRetry` times.
    pub(crate) fn can_retry(&self, sequence: Option<usize>) -> bool {
        let Some(sequence) = sequence else {
            return false;
        };
        self.sequence_tries[sequence] >= 1
            && self.sequence_tries[sequence] <= self.jobs[sequence].sequence_retry
    }

    /// Puts every job of a sequence back to PENDING for its next try (runner.md §7, but
    /// the whole sequence, and nested sequences' budgets reset too).
    pub(crate) fn reset_sequence(&mut self, sequence: usize) {
        for idx in self.members(sequence) {
            self.set_state(idx, State::Pending);
            self.latest_tries[idx] = 0;
            if idx != sequence && self.is_sequence_start(idx) {
                self.sequence_tries[idx] = 0;
            }
            if let Some(window) = self.windows.get_mut(&idx) {
                window.active.clear();
                window.waiting.clear();
            }
        }
    }

    /// Copies a completed job's data into each successor's (runner.md §8).
    pub(crate) fn pass_data(&mut self, idx: usize) {
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

    fn counters(&self, values: &[u32], keep: impl Fn(usize) -> bool) -> BTreeMap<String, u32> {
        values
            .iter()
            .enumerate()
            .filter(|(idx, n)| **n > 0 || keep(*idx))
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
                .enumerate()
                .map(|(idx, job)| {
                    let job = proto::Job {
                        state: self.states[idx],
                        data: self.data[idx].clone(),
                        ..(**job).clone()
                    };
                    (job.id.clone(), job)
                })
                .collect(),
            adjacency_list: self
                .succs
                .iter()
                .enumerate()
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
            total_job_tries: self.counters(&self.total_tries, |_| false),
            latest_run_job_tries: self.counters(&self.latest_tries, |_| false),
            sequence_tries: self.counters(&self.sequence_tries, |_| false),
        }
    }
}
