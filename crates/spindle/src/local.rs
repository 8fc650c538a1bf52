//! The Request Manager and a Job Runner in one process (`spindle server`, `spindle run`):
//! the Request Manager reaches the Job Runner through [`InProcessJr`], and the Job Runner
//! reports to the Request Manager through [`ManagerReporter`], both by direct calls.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use chain::{ReportError, Reporter};
use job::Registry;
use proto::{
    FinishRequest, JobChain, JobLog, JobStatus, RequestId, RequestProgress, SuspendedJobChain,
};
use rm::{ClientError, JrClient, Manager};

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
        jr::Error::ShuttingDown | jr::Error::NotStopped(_) => ClientError::Unavailable(message),
        jr::Error::Refused(ref err) if !err.is_invalid_chain() => ClientError::Unavailable(message),
        jr::Error::Invalid(_) | jr::Error::Refused(_) => ClientError::Invalid(message),
        jr::Error::AlreadyRunning(_) => ClientError::AlreadyRunning(message),
        jr::Error::NotFound(_) => ClientError::NotFound(message),
    }
}

#[async_trait::async_trait]
impl JrClient for InProcessJr {
    async fn new_chain(&self, job_chain: &JobChain) -> Result<String, ClientError> {
        let runner = self.runner()?;
        runner.run_chain(job_chain.clone()).map_err(client_error)?;
        Ok(runner.base_url().to_owned())
    }

    async fn resume(&self, suspended: &SuspendedJobChain) -> Result<String, ClientError> {
        let runner = self.runner()?;
        runner.resume(suspended.clone()).map_err(client_error)?;
        Ok(runner.base_url().to_owned())
    }

    async fn stop(&self, _jr_url: &str, request_id: &RequestId) -> Result<(), ClientError> {
        self.runner()?.stop(request_id).await.map_err(client_error)
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

pub(crate) async fn local(
    specs: spec::Specs,
    registry: Registry,
    database: &str,
    base_url: &str,
    interval: Duration,
    suspended_ttl: Duration,
) -> anyhow::Result<Local> {
    let store = store::open(database).await?;
    let registry = Arc::new(registry);
    let grapher = graph::Grapher::new(specs, registry.clone());
    let jr = Arc::new(InProcessJr::default());
    let options = rm::Options {
        interval,
        suspended_ttl,
        host: gethostname::gethostname().to_string_lossy().into_owned(),
        ..rm::Options::default()
    };
    let manager = Arc::new(Manager::new(grapher, store, jr.clone(), options));
    let runner = jr::Runner::new(
        registry,
        Arc::new(ManagerReporter(manager.clone())),
        base_url,
        chain::Options::default(),
    );
    let _ = jr.runner.set(runner.clone());
    Ok(Local { manager, runner })
}

/// A Job Runner in the same process reports straight to the manager. The manager's
/// errors say whether to send again: unavailable (a busy database) is retried, a fault
/// a few times, a refusal not at all.
#[derive(Debug)]
pub(crate) struct ManagerReporter(pub(crate) Arc<Manager>);

fn report_error(err: rm::Error) -> ReportError {
    match err {
        err @ rm::Error::Unavailable { .. } => ReportError::unavailable(err.chain()),
        err @ rm::Error::Internal { .. } => ReportError::failed(err.chain()),
        other => ReportError::rejected(other.to_string()),
    }
}

#[async_trait::async_trait]
impl Reporter for ManagerReporter {
    async fn job_logs(&self, entries: &[JobLog]) -> Result<(), ReportError> {
        self.0
            .add_job_logs(entries.to_vec())
            .await
            .map_err(report_error)
    }

    async fn output(&self, chunks: &[proto::OutputChunk]) -> Result<(), ReportError> {
        self.0
            .add_output(chunks.to_vec())
            .await
            .map_err(report_error)
    }

    async fn progress(&self, progress: &RequestProgress) -> Result<(), ReportError> {
        self.0.progress(progress).await.map_err(report_error)
    }

    async fn finish(&self, finish: &FinishRequest) -> Result<(), ReportError> {
        self.0.finish(finish).await.map_err(report_error)
    }

    async fn suspend(&self, suspended: &SuspendedJobChain) -> Result<(), ReportError> {
        self.0.suspend(suspended).await.map_err(report_error)
    }
}
