//! The traverser's reactions to its tasks' ends: a job's try ended, a runner panicked;
//! and starting the jobs that may run (in turns, each under its sequence's cancel token).

use super::*;

impl Traverser {
    pub(super) fn on_event(&mut self, event: Event) {
        match event {
            Event::Done(done) => self.on_job_done(done),
            Event::RunnerPanicked(idx, panic) => self.on_runner_panic(idx, &panic),
            Event::RetryWaitOver(sequence) => {
                if self.retry_waits.remove(&sequence).is_none() {
                    // Aborted (stop, suspend, an outer retry) just after it ended.
                    return;
                }
                let start = sequence.start();
                if self.mode == Mode::Running && self.chain.is_runnable(start) {
                    self.chain.sequence_tries[start] += 1;
                    self.arm_sequence_timer(sequence);
                    self.start(start);
                }
            }
            Event::SequenceTimedOut(sequence, run) => self.on_sequence_timeout(sequence, run),
        }
    }

    pub(super) fn on_job_done(&mut self, done: JobDone) {
        let JobDone {
            idx,
            state,
            data,
            latest_tries,
            total_tries,
        } = done;
        if self.running.remove(&idx).is_none() {
            // Abandoned already (it ended just as its stop timeout ran out).
            return;
        }
        self.observe_job_end();
        self.element_cancel.remove(&idx);
        self.chain.latest_tries[idx] += latest_tries;
        self.chain.total_tries[idx] += total_tries;
        self.chain.data[idx] = data;
        // Anything but COMPLETE, STOPPED and UNKNOWN from a job is a failure.
        let state = match state {
            State::Complete | State::Stopped | State::Unknown => state,
            _ => State::Fail,
        };
        self.chain.set_state(idx, state);
        self.after_job_end(idx, state);
    }

    /// What follows a job's end: progress, the next jobs, or a sequence retry.
    pub(super) fn after_job_end(&mut self, idx: JobIdx, state: State) {
        if state == State::Complete {
            self.queue_report(Report::Progress(self.chain.finished_jobs));
        }
        // A job of a sequence that is being reset only counts toward the reset.
        if let Some(sequence) = self.retrying_sequence_of(idx) {
            self.reset_if_idle(sequence);
            return;
        }
        if !self.chain.budgets.is_empty() {
            self.settle_element(idx);
        }
        match (self.mode, state) {
            (Mode::Stopping | Mode::Abandoning, _) => {}
            (_, State::Complete) => {
                self.chain.pass_data(idx);
                if self.mode == Mode::Running {
                    if let Some(next) = self.chain.leave_window(idx) {
                        self.dispatch(next);
                    }
                    for i in 0..self.chain.succs[idx].len() {
                        let succ = self.chain.succs[idx][i];
                        self.dispatch(succ);
                    }
                }
            }
            (_, State::Stopped) => {}
            (_, _) => {
                // A job stopped by its sequence's timeout counts toward that sequence.
                if let Some(sequence) = self.timed_out_sequence_of(idx) {
                    self.stop_reasons
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .remove(&idx);
                    if !self
                        .running
                        .keys()
                        .any(|&other| self.chain.in_sequence(other, sequence))
                    {
                        self.after_sequence_failed(sequence);
                    }
                    return;
                }
                let sequence = self.chain.sequence_of[idx];
                if self.chain.can_retry(sequence) {
                    let sequence = sequence.expect("can_retry checked it");
                    self.begin_sequence_retry(sequence);
                } else if !self.chain.budgets.is_empty() {
                    self.element_failed(idx);
                }
            }
        }
    }

    /// Starts a runnable job, or holds it: while the chain is paused, behind a full
    /// `parallel` window, or for the retry wait of a sequence that runs again.
    pub(super) fn dispatch(&mut self, idx: JobIdx) {
        // Only a job that may start waits its turn (a fan-in's last job is offered by
        // each of its predecessors as it ends).
        if !self.chain.is_runnable(idx) || self.running.contains_key(&idx) {
            return;
        }
        if self.mode == Mode::Running
            && (!self.deferred.is_empty()
                || self.started_this_turn >= START_CHUNK
                || !self.has_room())
        {
            // In order behind those deferred already; checked again when it starts.
            self.deferred.push_back(idx);
            return;
        }
        self.dispatch_now(idx);
    }

    /// [`Traverser::dispatch`] without deferring.
    pub(super) fn dispatch_now(&mut self, idx: JobIdx) {
        if self.mode != Mode::Running
            || !self.chain.is_runnable(idx)
            || self.running.contains_key(&idx)
        {
            return;
        }
        if self.paused {
            self.held.insert(idx);
            return;
        }
        if self.retrying_sequence_of(idx).is_some() || self.timed_out_sequence_of(idx).is_some() {
            return;
        }
        // A node past its failure budget starts no new element.
        if !self.chain.budgets.may_start(idx) {
            return;
        }
        if !self.chain.enter_window(idx) {
            return;
        }
        if let Some(sequence) = self.chain.sequence_started_by(idx) {
            if self.chain.sequence_tries[idx] > 0 {
                // A retry of the sequence: wait first (a resumed chain waits too).
                if self.retry_waits.contains_key(&sequence) {
                    return;
                }
                let wait = self.chain.waits[idx].sequence_retry_wait;
                let timer = self.spawn_observed(
                    async move {
                        tokio::time::sleep(wait).await;
                        Event::RetryWaitOver(sequence)
                    },
                    // A timer cannot really panic; if it did, its wait is over.
                    move |_| Event::RetryWaitOver(sequence),
                );
                self.retry_waits.insert(sequence, timer);
                return;
            }
            self.chain.sequence_tries[idx] += 1;
            self.arm_sequence_timer(sequence);
        }
        self.start(idx);
    }

    /// The token that cancels the jobs of `sequence` (the chain-wide one for jobs outside
    /// any sequence).
    pub(super) fn cancel_token(&mut self, sequence: Option<Seq>) -> CancellationToken {
        let Some(sequence) = sequence else {
            return self.cancel_all.clone();
        };
        if let Some(token) = self.sequence_cancel.get(&sequence) {
            return token.clone();
        }
        let parent = self.chain.parent(sequence);
        let token = self.cancel_token(parent).child_token();
        self.sequence_cancel.insert(sequence, token.clone());
        token
    }

    pub(super) fn start(&mut self, idx: JobIdx) {
        self.started_this_turn += 1;
        self.chain.set_state(idx, State::Running);
        self.chain.budgets.started(idx);
        let cancel = self.job_cancel_token(idx);
        let live = Live::default();
        let dispatch = Dispatch {
            idx,
            request_id: Arc::clone(&self.request_id),
            job: Arc::clone(&self.chain.jobs[idx]),
            data: std::mem::take(&mut self.chain.data[idx]),
            prev_latest: self.chain.latest_tries[idx],
            prev_total: self.chain.total_tries[idx],
            sequence_try: self.chain.sequence_of[idx]
                .map_or(0, |sequence| self.chain.sequence_tries[sequence.start()]),
            retry_wait: self.chain.waits[idx].retry_wait,
            timeout: self.chain.waits[idx].timeout,
            factory: Arc::clone(&self.factory),
            cancel,
            live: live.clone(),
            reports: self.reports.clone(),
            output: Arc::clone(&self.output),
            stop_reasons: Arc::clone(&self.stop_reasons),
        };
        let task = self.spawn_observed(
            runner::run(Box::new(dispatch)).map(Event::Done),
            move |panic| Event::RunnerPanicked(idx, panic),
        );
        if let Some(observer) = &self.options.observer {
            observer.job_started();
        }
        self.running.insert(
            idx,
            Active {
                live,
                started_at: runner::now_nanos(),
                task,
            },
        );
    }
}
