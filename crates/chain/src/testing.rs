//! What tests run a chain with (this crate's users': the Job Runner's, the custom-job
//! example's): a [`Reporter`] that keeps everything a chain reports.

use std::sync::Mutex;

use proto::{FinishRequest, JobLog, OutputChunk, RequestProgress, SuspendedJobChain, TryStart};

use crate::{ReportError, Reporter};

/// Keeps every report, in the order they came: each try's start, every job log entry
/// (those a final state carries too), output, the progress counts, final states and
/// suspended chains.
#[derive(Debug, Default)]
pub struct Kept {
    pub starts: Mutex<Vec<TryStart>>,
    pub logs: Mutex<Vec<JobLog>>,
    pub output: Mutex<Vec<OutputChunk>>,
    pub progress: Mutex<Vec<u64>>,
    pub finishes: Mutex<Vec<FinishRequest>>,
    pub suspended: Mutex<Vec<SuspendedJobChain>>,
}

impl Kept {
    /// The last final state reported.
    pub fn finish(&self) -> Option<FinishRequest> {
        self.finishes.lock().unwrap().last().cloned()
    }
}

#[async_trait::async_trait]
impl Reporter for Kept {
    async fn try_starts(&self, starts: &[TryStart]) -> Result<(), ReportError> {
        self.starts.lock().unwrap().extend_from_slice(starts);
        Ok(())
    }
    async fn job_logs(&self, entries: &[JobLog]) -> Result<(), ReportError> {
        self.logs.lock().unwrap().extend_from_slice(entries);
        Ok(())
    }
    async fn output(&self, chunks: &[OutputChunk]) -> Result<(), ReportError> {
        self.output.lock().unwrap().extend_from_slice(chunks);
        Ok(())
    }
    async fn progress(&self, progress: &RequestProgress) -> Result<(), ReportError> {
        self.progress.lock().unwrap().push(progress.finished_jobs);
        Ok(())
    }
    async fn finish(&self, finish: &FinishRequest) -> Result<(), ReportError> {
        // The final state carries the entries queued with it (Reporter::finish).
        let mut logs = self.logs.lock().unwrap();
        logs.extend_from_slice(&finish.job_logs);
        self.finishes.lock().unwrap().push(finish.clone());
        Ok(())
    }
    async fn suspend(&self, suspended: &SuspendedJobChain) -> Result<(), ReportError> {
        self.suspended.lock().unwrap().push(suspended.clone());
        Ok(())
    }
}
