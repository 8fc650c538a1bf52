//! What the traverser benchmarks share: a Reporter that only counts what it receives,
//! and one run of a chain to its end.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chain::{Options, ReportError, Reporter};
use proto::{FinishRequest, JobChain, JobLog, RequestProgress, State, SuspendedJobChain};

#[derive(Default)]
pub(crate) struct Counting {
    pub(crate) logs: AtomicUsize,
}

#[async_trait::async_trait]
impl Reporter for Counting {
    async fn try_starts(&self, _starts: &[proto::TryStart]) -> Result<(), ReportError> {
        Ok(())
    }
    async fn job_logs(&self, entries: &[JobLog]) -> Result<(), ReportError> {
        self.logs.fetch_add(entries.len(), Ordering::Relaxed);
        Ok(())
    }
    async fn output(&self, _chunks: &[proto::OutputChunk]) -> Result<(), ReportError> {
        Ok(())
    }
    async fn progress(&self, _progress: &RequestProgress) -> Result<(), ReportError> {
        Ok(())
    }
    async fn finish(&self, finish: &FinishRequest) -> Result<(), ReportError> {
        self.logs
            .fetch_add(finish.job_logs.len(), Ordering::Relaxed);
        Ok(())
    }
    async fn suspend(&self, _suspended: &SuspendedJobChain) -> Result<(), ReportError> {
        Ok(())
    }
}

/// Runs `chain` with the built-in job types to its end; how long it took (it must
/// complete, every job logged once).
pub(crate) async fn run_once(chain: JobChain) -> Duration {
    let reporter = Arc::new(Counting::default());
    let factory = Arc::new(job::Registry::builtin());
    let n_jobs = chain.jobs.len();
    let start = Instant::now();
    let handle =
        chain::run(chain, factory, reporter.clone(), Options::default()).expect("valid chain");
    let end = handle.wait().await;
    let elapsed = start.elapsed();
    assert_eq!(end.state, State::Complete);
    assert_eq!(reporter.logs.load(Ordering::Relaxed), n_jobs);
    elapsed
}
