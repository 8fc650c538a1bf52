//! The specs' schedules: their status, and starting the requests they fire (one Request
//! Manager of several per firing, by a claim in the store).

use super::*;

impl Manager {
    /// The schedules with their next and last runs.
    pub async fn schedules(&self) -> Result<Vec<proto::ScheduleStatus>, Error> {
        let now = Utc::now();
        let mut statuses = Vec::new();
        let schedules = Arc::clone(&self.read_loaded().schedules);
        for fires in schedules.iter() {
            let last = self.store.schedule_runs(&fires.name, 1).await?.pop();
            statuses.push(proto::ScheduleStatus {
                name: fires.name.clone(),
                cron: fires.cron.clone(),
                timezone: fires.timezone.name().to_owned(),
                request: fires.request.clone(),
                args: fires.args.clone(),
                overlap: policy_name(fires.overlap == spec::schedule::Overlap::Start),
                missed: policy_name(fires.missed == spec::schedule::Missed::Start),
                next: fires.next(now),
                last,
            });
        }
        Ok(statuses)
    }

    /// Starts the runs of every schedule that fell due since its last run (claimed in
    /// the store, so that of several Request Managers one starts each). A run missed by
    /// more than a round or two, or due before this Request Manager started (no Request
    /// Manager ran), is skipped, or with `missed: start` started late, the latest one
    /// only. With `overlap: skip`, a run due while
    /// the previous one still goes starts nothing and says so.
    pub async fn run_schedules(&self) {
        let schedules = Arc::clone(&self.read_loaded().schedules);
        if schedules.is_empty() || self.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        let now = Utc::now();
        let grace = chrono_duration(self.options.interval * 2).max(chrono::Duration::seconds(2));
        for fires in schedules.iter() {
            if let Err(err) = self.run_schedule(fires, now, grace).await {
                tracing::warn!(schedule = fires.name, error = %err.chain(), "running a schedule failed; trying again next round");
            }
        }
    }

    pub(super) async fn run_schedule(
        &self,
        fires: &spec::schedule::Fires,
        now: chrono::DateTime<Utc>,
        grace: chrono::Duration,
    ) -> Result<(), Error> {
        let recent = self.store.schedule_runs(&fires.name, 20).await?;
        // Runs due before this: missed. A round may come `grace` late, but a run due
        // before this Request Manager started was missed all the same (`missed: skip`
        // is honoured at start).
        let cutoff = (now - grace).max(self.started_at);
        // A new schedule (no run stored) begins at the cutoff: runs due before a Request
        // Manager first served it were never scheduled, so none is missed, whatever
        // `missed:` says (README, "Schedules"); one that ran goes on from its last run.
        let after = recent.first().map_or(cutoff, |run| run.due_at);
        let mut due = fires.due(after, now);
        let late: Vec<_> = due.iter().copied().filter(|at| *at < cutoff).collect();
        if !late.is_empty() {
            due.retain(|at| *at >= cutoff);
            if fires.missed == spec::schedule::Missed::Start {
                due.insert(0, *late.last().expect("not empty"));
            }
            tracing::warn!(
                schedule = fires.name,
                missed = late.len(),
                started_late = fires.missed == spec::schedule::Missed::Start,
                "runs of a schedule were missed (no Request Manager ran)"
            );
        }
        for due_at in due {
            if !self
                .store
                .claim_schedule_run(&fires.name, due_at, &self.options.host)
                .await?
            {
                continue;
            }
            // Read again: this round may have started the run before.
            let recent = self.store.schedule_runs(&fires.name, 20).await?;
            let previous = recent
                .iter()
                .find(|run| run.due_at < due_at && run.skipped.is_empty());
            let still_going = match previous {
                Some(run) if run.request_id.is_empty() => true,
                Some(run) => !self
                    .store
                    .get_request(&run.request_id, false)
                    .await
                    .map(|r| r.state.is_finished())
                    .unwrap_or(true),
                None => false,
            };
            if still_going && fires.overlap == spec::schedule::Overlap::Skip {
                let why = format!(
                    "the previous run ({}) still goes, and overlap is skip",
                    previous
                        .map(|run| run.request_id.as_str())
                        .unwrap_or_default()
                );
                tracing::info!(schedule = fires.name, due = %due_at, "schedule run skipped: {why}");
                self.store
                    .schedule_run_done(&fires.name, due_at, "", &why)
                    .await?;
                continue;
            }
            let user = format!(
                "schedule:{}@{}",
                fires.name,
                due_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
            let create = CreateRequest {
                request_type: fires.request.clone(),
                args: fires.args.clone(),
                user: user.clone(),
                priority: None,
                idempotency_key: None,
            };
            match self.create(create, &user, "").await {
                Ok(request) => {
                    tracing::info!(schedule = fires.name, due = %due_at, request_id = request.id, "schedule started a request");
                    self.store
                        .schedule_run_done(&fires.name, due_at, &request.id, "")
                        .await?;
                }
                Err(err) => {
                    let why = format!("creating the request failed: {}", err.chain());
                    tracing::error!(schedule = fires.name, due = %due_at, "{why}");
                    self.store
                        .schedule_run_done(&fires.name, due_at, "", &why)
                        .await?;
                }
            }
        }
        Ok(())
    }

    /// How long until the next run of a loaded schedule falls due (a few milliseconds
    /// after it, so that it is due when the clock is read again); `None` without
    /// schedules.
    pub(super) fn until_next_schedule(&self) -> Option<std::time::Duration> {
        let schedules = Arc::clone(&self.read_loaded().schedules);
        let now = Utc::now();
        let next = schedules.iter().filter_map(|fires| fires.next(now)).min()?;
        let wait = (next - now).to_std().unwrap_or_default();
        Some(wait + std::time::Duration::from_millis(5))
    }
}
