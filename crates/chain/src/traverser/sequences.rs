//! Sequences as units: retrying a whole sequence (stop it, wait, start its first job
//! again) and its `sequenceTimeout`.

use super::*;

impl Traverser {
    /// The outermost sequence being reset that job `idx` belongs to.
    pub(super) fn retrying_sequence_of(&self, idx: JobIdx) -> Option<Seq> {
        self.retrying
            .iter()
            .copied()
            .filter(|&sequence| self.chain.in_sequence(idx, sequence))
            .find(|&sequence| {
                !self
                    .retrying
                    .iter()
                    .any(|&other| other != sequence && self.chain.seq_within(sequence, other))
            })
    }

    /// Stops what runs of `sequence` (its jobs and those of the sequences inside it) and
    /// the retry waits inside it; its next run gets fresh tokens.
    pub(super) fn stop_sequence(&mut self, sequence: Seq) {
        let chain = &self.chain;
        self.sequence_cancel.retain(|&other, token| {
            if chain.seq_within(other, sequence) {
                token.cancel();
                false
            } else {
                true
            }
        });
        self.retry_waits.retain(|&waiting, wait| {
            let inside = chain.seq_within(waiting, sequence);
            if inside {
                wait.abort();
            }
            !inside
        });
    }

    /// A job of `sequence` failed and the sequence may run again: stop what still runs
    /// of it, then (once nothing of it runs) reset it and restart it after its wait.
    pub(super) fn begin_sequence_retry(&mut self, sequence: Seq) {
        // A retry of an enclosing sequence replaces retries of sequences inside it.
        let chain = &self.chain;
        self.retrying
            .retain(|&other| !chain.seq_within(other, sequence));
        self.retrying.insert(sequence);
        self.stop_sequence(sequence);
        self.chain.forget_waiting_in(sequence);
        self.reset_if_idle(sequence);
    }

    /// Resets a sequence being retried once none of its jobs runs; when running (not
    /// suspending), restarts it.
    pub(super) fn reset_if_idle(&mut self, sequence: Seq) {
        if self
            .running
            .keys()
            .any(|&idx| self.chain.in_sequence(idx, sequence))
        {
            return;
        }
        self.retrying.remove(&sequence);
        let chain = &self.chain;
        self.timed_out
            .retain(|&other, _| !chain.seq_within(other, sequence));
        self.chain.reset_sequence(sequence);
        self.queue_report(Report::Progress(self.chain.finished_jobs));
        if self.mode == Mode::Running {
            self.dispatch(sequence.start());
        }
    }

    /// A sequence starts a run: if it has a timeout, its timer starts too.
    pub(super) fn arm_sequence_timer(&mut self, sequence: Seq) {
        let Some(&timeout) = self.chain.sequence_timeouts.get(&sequence) else {
            return;
        };
        let run = self.chain.sequence_tries[sequence.start()];
        let timer = self.spawn_observed(
            async move {
                tokio::time::sleep(timeout).await;
                Event::SequenceTimedOut(sequence, run)
            },
            move |_| Event::SequenceTimedOut(sequence, run),
        );
        if let Some(old) = self.sequence_timers.insert(sequence, timer) {
            old.abort();
        }
    }

    /// The outermost sequence past its timeout that job `idx` belongs to.
    pub(super) fn timed_out_sequence_of(&self, idx: JobIdx) -> Option<Seq> {
        if self.timed_out.is_empty() {
            return None;
        }
        self.timed_out
            .keys()
            .copied()
            .filter(|&sequence| self.chain.in_sequence(idx, sequence))
            .find(|&sequence| {
                !self
                    .timed_out
                    .keys()
                    .any(|&other| other != sequence && self.chain.seq_within(sequence, other))
            })
    }

    /// A sequence's run reached its timeout: its running jobs are stopped and fail with
    /// the reason, nothing more of it starts, and it fails (its retries apply once
    /// nothing of it runs).
    pub(super) fn on_sequence_timeout(&mut self, sequence: Seq, run: u32) {
        let start = sequence.start();
        if self.mode != Mode::Running
            || self.chain.sequence_tries[start] != run
            || self.timed_out.contains_key(&sequence)
        {
            return;
        }
        self.sequence_timers.remove(&sequence);
        let members = self.chain.members(sequence);
        if members
            .iter()
            .all(|&idx| self.chain.state(idx) == State::Complete)
        {
            return;
        }
        let timeout = self.chain.sequence_timeouts[&sequence];
        let reason = if self.chain.parent(sequence).is_none() {
            format!(
                "the request's deadline passed: it did not finish within {}; the job was stopped",
                proto::duration::format(timeout)
            )
        } else {
            format!(
                "sequence {} timed out after {}; the job was stopped",
                self.chain.jobs[start].name,
                proto::duration::format(timeout)
            )
        };
        tracing::warn!(sequence = %self.chain.jobs[start].name, reason, "sequence timed out");
        {
            let mut reasons = self
                .stop_reasons
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            for &idx in self.running.keys() {
                if self.chain.in_sequence(idx, sequence) {
                    reasons.insert(idx, reason.clone());
                }
            }
        }
        self.timed_out.insert(sequence, reason);
        self.stop_sequence(sequence);
        let chain = &self.chain;
        self.retrying
            .retain(|&other| !chain.seq_within(other, sequence));
        if !self
            .running
            .keys()
            .any(|&idx| self.chain.in_sequence(idx, sequence))
        {
            self.after_sequence_failed(sequence);
        }
    }

    /// A timed-out sequence has nothing running any more: it runs again if its retries
    /// allow (else the chain fails once the rest has ended).
    pub(super) fn after_sequence_failed(&mut self, sequence: Seq) {
        if self.chain.can_retry(Some(sequence)) {
            self.begin_sequence_retry(sequence);
        } else if !self.chain.budgets.is_empty() {
            self.element_failed(sequence.start());
        }
    }
}
