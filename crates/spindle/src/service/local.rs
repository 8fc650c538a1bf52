//! The Request Manager and a Job Runner in one process (`spindle server`, `spindle run`):
//! the Request Manager reaches the Job Runner through [`InProcessJr`], and the Job Runner
//! reports to the Request Manager through [`ManagerReporter`], both by direct calls.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use chain::{ReportError, Reporter};
use job::Registry;
use proto::{
    Fence, FinishRequest, JobLog, JobRunner, JobStatus, LeaseRenewal, RequestId, RequestProgress,
    RunnerRegistration, SuspendedJobChain, TryStart,
};
use rm::{ClientError, HandOver, HandedOver, JrClient, Manager, NewChain};

/// The Job Runner in the same process: RM and JR call each other directly.
#[derive(Debug, Default)]
pub(crate) struct InProcessJr {
    runner: OnceLock<Arc<jr::Runner>>,
}

impl InProcessJr {
    fn runner(&self) -> Result<&Arc<jr::Runner>, ClientError> {
        self.runner
            .get()
            .ok_or_else(|| ClientError::Unavailable("the job runner is not started yet".to_owned()))
    }
}

/// A Job Runner's refusal in the Request Manager's terms.
fn client_error(err: jr::Error) -> ClientError {
    let message = err.to_string();
    match err {
        jr::Error::ShuttingDown | jr::Error::NotRegistered | jr::Error::NotStopped(_) => {
            ClientError::Unavailable(message)
        }
        jr::Error::Refused(ref err) if err.waits_for_another_runner() => {
            ClientError::MissingJobTypes(message)
        }
        // Job states that do not fit: what an HTTP runner answers with a 500.
        jr::Error::Refused(ref err) if !err.is_invalid_chain() => ClientError::Faulted(message),
        jr::Error::Invalid(_) | jr::Error::Refused(_) => ClientError::Invalid(message),
        jr::Error::AlreadyRunning(_) => ClientError::AlreadyRunning(message),
        jr::Error::NotFound(_) => ClientError::NotFound(message),
    }
}

/// What the manager hears of a chain `runner` took as `instance`.
fn handed_over(
    runner: &jr::Runner,
    instance: Result<String, jr::Error>,
) -> Result<HandedOver, ClientError> {
    Ok(HandedOver {
        url: runner.base_url().to_owned(),
        instance: instance.map_err(client_error)?,
    })
}

#[async_trait::async_trait]
impl JrClient for InProcessJr {
    async fn new_chain(
        &self,
        _jr_url: &str,
        job_chain: NewChain,
        hand_over: &HandOver,
    ) -> Result<HandedOver, ClientError> {
        // In process: the chain itself runs; its JSON is of no use here (let go before
        // the runner takes the chain in, which is when a big one's memory peaks).
        let NewChain {
            chain: job_chain,
            json,
        } = job_chain;
        drop(json);
        let runner = self.runner()?;
        let (epoch, trace, paused) = (hand_over.epoch, hand_over.trace, hand_over.paused);
        let secrets = hand_over.secrets.clone();
        handed_over(
            runner,
            runner.run_chain(job_chain, epoch, trace, paused, secrets),
        )
    }

    async fn resume(
        &self,
        _jr_url: &str,
        suspended: &SuspendedJobChain,
        hand_over: &HandOver,
    ) -> Result<HandedOver, ClientError> {
        let runner = self.runner()?;
        let (epoch, trace, paused) = (hand_over.epoch, hand_over.trace, hand_over.paused);
        handed_over(
            runner,
            runner.resume(
                suspended.clone(),
                epoch,
                trace,
                paused,
                hand_over.secrets.clone(),
            ),
        )
    }

    async fn stop(&self, _jr_url: &str, request_id: &RequestId) -> Result<(), ClientError> {
        self.runner()?.stop(request_id).await.map_err(client_error)
    }

    async fn pause(
        &self,
        _jr_url: &str,
        request_id: &RequestId,
        paused: bool,
    ) -> Result<(), ClientError> {
        self.runner()?
            .set_paused(request_id, paused)
            .map_err(client_error)
    }

    async fn answer(
        &self,
        _jr_url: &str,
        request_id: &RequestId,
        job_id: &str,
        answer: &proto::Answer,
    ) -> Result<(), ClientError> {
        self.runner()?.answer(request_id, job_id, answer.clone());
        Ok(())
    }

    async fn running(
        &self,
        _jr_url: &str,
        request_id: Option<&RequestId>,
    ) -> Result<Vec<JobStatus>, ClientError> {
        self.runner()?
            .running(request_id.map(RequestId::as_str))
            .await
            .map_err(client_error)
    }
}

/// A Request Manager and a Job Runner wired together in this process.
pub(crate) struct Local {
    pub(crate) manager: Arc<Manager>,
    pub(crate) runner: Arc<jr::Runner>,
}

/// How the in-process pair is set up.
#[derive(Clone)]
pub(crate) struct LocalSettings<'a> {
    /// The opened store (opened by the caller, so that it may open it while the specs
    /// load).
    pub(crate) store: std::sync::Arc<dyn store::Store>,
    pub(crate) base_url: &'a str,
    /// What tells this process's Request Manager from others on the database (its
    /// claims name it): the machine's name and what is unique on it.
    pub(crate) host: String,
    pub(crate) interval: Duration,
    pub(crate) suspended_ttl: Duration,
    pub(crate) lease: Duration,
    /// One set of metrics and one trace exporter for both halves.
    pub(crate) telemetry: telemetry::Telemetry,
    /// The Request Manager's authentication; `None`: off.
    pub(crate) auth: Option<Arc<auth::Auth>>,
    /// Finished requests older than this are removed; `None`: kept.
    pub(crate) retention: Option<Duration>,
    /// Creates are refused past this backlog; `None`: never.
    pub(crate) max_backlog: Option<u64>,
}

pub(crate) async fn local(
    specs: spec::Specs,
    registry: Registry,
    settings: LocalSettings<'_>,
) -> anyhow::Result<Local> {
    let LocalSettings {
        store,
        base_url,
        host,
        interval,
        suspended_ttl,
        lease,
        telemetry,
        auth,
        retention,
        max_backlog,
    } = settings;
    let registry = Arc::new(registry);
    let grapher = graph::Grapher::new(specs, registry.clone());
    let jr = Arc::new(InProcessJr::default());
    let options = rm::Options {
        interval,
        suspended_ttl,
        host,
        lease,
        stale_claim: super::config::stale_claim(lease, interval),
        // The runner in this process takes every chain.
        jr_url: Some(base_url.to_owned()),
        fixed_runners: Vec::new(),
        telemetry: telemetry.clone(),
        auth,
        retention,
        max_backlog,
    };
    let manager = Arc::new(Manager::new(grapher, store, jr.clone(), options));
    let runner = jr::Runner::new(
        registry,
        Arc::new(ManagerReporters(manager.clone())),
        base_url,
        chain::Options::default(),
        telemetry,
    );
    let _ = jr.runner.set(runner.clone());
    Ok(Local { manager, runner })
}

/// A Job Runner in the same process reports straight to the manager. The manager's
/// errors say whether to send again: unavailable (a busy database) is retried, a fault
/// a few times, a refusal not at all, and a report from a runner that no longer owns the
/// request abandons its chain.
#[derive(Debug)]
pub(crate) struct ManagerReporter {
    manager: Arc<Manager>,
    fence: Fence,
}

/// The in-process runner's [`jr::Reporters`]: each chain's reports name its fence, as
/// over HTTP, so a chain this process no longer owns is refused here too.
#[derive(Debug)]
pub(crate) struct ManagerReporters(pub(crate) Arc<Manager>);

impl jr::Reporters for ManagerReporters {
    fn for_chain(&self, fence: Fence) -> Arc<dyn Reporter> {
        Arc::new(ManagerReporter {
            manager: self.0.clone(),
            fence,
        })
    }
}

/// A report's answer from the manager, as the runner's reporter answers it.
fn reported(result: Result<(), rm::Error>) -> Result<(), ReportError> {
    result.map_err(report_error)
}

fn report_error(err: rm::Error) -> ReportError {
    match err {
        err @ rm::Error::Unavailable { .. } => ReportError::unavailable(err.chain()),
        err @ rm::Error::Internal { .. } => ReportError::failed(err.chain()),
        err @ rm::Error::Fenced(_) => ReportError::fenced(err.to_string()),
        other => ReportError::rejected(other.to_string()),
    }
}

#[async_trait::async_trait]
impl Reporter for ManagerReporter {
    async fn try_starts(&self, starts: &[TryStart]) -> Result<(), ReportError> {
        let (manager, fence) = (&self.manager, Some(&self.fence));
        reported(manager.add_try_starts(starts.to_vec(), fence).await)
    }

    async fn job_logs(&self, entries: &[JobLog]) -> Result<(), ReportError> {
        let (manager, fence) = (&self.manager, Some(&self.fence));
        reported(manager.add_job_logs(entries.to_vec(), fence).await)
    }

    async fn output(&self, chunks: &[proto::OutputChunk]) -> Result<(), ReportError> {
        let (manager, fence) = (&self.manager, Some(&self.fence));
        reported(manager.add_output(chunks.to_vec(), fence).await)
    }

    async fn progress(&self, progress: &RequestProgress) -> Result<(), ReportError> {
        reported(self.manager.progress(progress, Some(&self.fence)).await)
    }

    async fn finish(&self, finish: &FinishRequest) -> Result<(), ReportError> {
        reported(self.manager.finish(finish, Some(&self.fence)).await)
    }

    async fn suspend(&self, suspended: &SuspendedJobChain) -> Result<(), ReportError> {
        reported(self.manager.suspend(suspended, Some(&self.fence)).await)
    }

    async fn take_job_locks(
        &self,
        request_id: &str,
        take: &proto::TakeJobLocks,
    ) -> Result<proto::JobLocksTaken, ReportError> {
        let fence = Some(&self.fence);
        (self.manager.take_job_locks(request_id, take, fence).await).map_err(report_error)
    }

    async fn release_job_locks(&self, request_id: &str, job_id: &str) -> Result<(), ReportError> {
        let fence = Some(&self.fence);
        reported(
            self.manager
                .release_job_locks(request_id, job_id, fence)
                .await,
        )
    }
}

/// The in-process runner registers and renews its lease with the manager itself.
#[derive(Debug)]
pub(crate) struct ManagerRegistry(pub(crate) Arc<Manager>);

fn registry_error(err: rm::Error) -> jr::RegistryError {
    match err {
        rm::Error::Unavailable { .. } | rm::Error::Internal { .. } => {
            jr::RegistryError::Unavailable(err.chain())
        }
        other => jr::RegistryError::Ended(other.to_string()),
    }
}

#[async_trait::async_trait]
impl jr::Registry for ManagerRegistry {
    async fn register(
        &self,
        registration: &RunnerRegistration,
    ) -> Result<JobRunner, jr::RegistryError> {
        self.0
            .register_runner(registration.clone())
            .await
            .map_err(registry_error)
    }

    async fn renew(
        &self,
        instance: &str,
        renewal: Option<&LeaseRenewal>,
    ) -> Result<JobRunner, jr::RegistryError> {
        self.0
            .renew_runner(instance, renewal.map(|renewal| renewal.running.as_slice()))
            .await
            .map_err(registry_error)
    }

    async fn deregister(&self, instance: &str) -> Result<(), jr::RegistryError> {
        self.0.end_runner(instance).await.map_err(registry_error)
    }
}
