//! What a Job Runner tells metrics and traces about each chain it runs: a
//! [`chain::Observer`] per chain ([`ChainWatch`]), and the chain's own span, emitted when
//! the chain ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use chain::ReportErrorKind;
use proto::{JobLog, State};
use telemetry::{Span, SpanContext, Telemetry, traces};

/// Where a chain's spans go: the chain's own span (its parent came with the hand-over).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChainTrace {
    /// The chain's span.
    pub(crate) span: SpanContext,
    /// Its parent's id, and whether the parent is another process's.
    pub(crate) parent: [u8; 8],
    pub(crate) remote: bool,
}

impl ChainTrace {
    /// Under the hand-over's span when the Request Manager sent one (`traceparent`),
    /// else under the request's root span.
    pub(crate) fn new(request_id: &str, handed_over: Option<SpanContext>) -> ChainTrace {
        let (parent, remote) = match handed_over {
            Some(parent) => (parent, true),
            None => (traces::request_root(request_id), false),
        };
        ChainTrace {
            span: parent.child(),
            parent: parent.span_id,
            remote,
        }
    }
}

/// One chain's observer.
#[derive(Debug)]
pub(crate) struct ChainWatch {
    pub(crate) telemetry: Telemetry,
    /// The tries' metrics, through handles kept for the chain.
    tries: Option<telemetry::metrics::TryMetrics>,
    pub(crate) trace: ChainTrace,
    /// The backlog this chain last reported, so the shared gauge moves by the change.
    backlog: AtomicUsize,
}

impl ChainWatch {
    pub(crate) fn new(telemetry: Telemetry, trace: ChainTrace) -> Arc<ChainWatch> {
        Arc::new(ChainWatch {
            tries: telemetry
                .metrics
                .clone()
                .map(telemetry::metrics::TryMetrics::new),
            telemetry,
            trace,
            backlog: AtomicUsize::new(0),
        })
    }

    /// The chain's span, from when it was accepted to its end in state `state`.
    pub(crate) fn chain_ended(
        &self,
        request_id: &str,
        started: SystemTime,
        state: State,
        resumed: bool,
    ) {
        self.telemetry.span(|| {
            let mut span = Span::new("run chain", self.trace.span, Some(self.trace.parent))
                .times(started, SystemTime::now())
                .attr("spindle.request_id", request_id.to_owned())
                .attr("spindle.state", state.to_string())
                .attr("spindle.resumed", resumed);
            span.remote_parent = self.trace.remote;
            span.kind = telemetry::traces::Kind::Server;
            if state == State::Fail {
                span.error = Some("the chain failed".to_owned());
            }
            span
        });
    }
}

fn kind_name(kind: ReportErrorKind) -> &'static str {
    match kind {
        ReportErrorKind::Unavailable => "unavailable",
        ReportErrorKind::Failed => "failed",
        ReportErrorKind::Rejected => "rejected",
        ReportErrorKind::Fenced => "fenced",
    }
}

impl chain::Observer for ChainWatch {
    fn job_started(&self) {
        if let Some(metrics) = &self.telemetry.metrics {
            metrics.jobs_running.inc();
        }
    }

    fn job_ended(&self) {
        if let Some(metrics) = &self.telemetry.metrics {
            metrics.jobs_running.dec();
        }
    }

    fn try_logged(&self, entry: &JobLog, retry: bool) {
        if let Some(tries) = &self.tries {
            tries.try_ended(entry, retry);
        }
        self.telemetry.span(|| {
            let mut span = Span::new(
                "job try",
                self.trace.span.child(),
                Some(self.trace.span.span_id),
            )
            .times(
                traces::from_unix_nanos(entry.started_at),
                traces::from_unix_nanos(entry.finished_at),
            )
            .attr("spindle.request_id", entry.request_id.clone())
            .attr("spindle.job_id", entry.job_id.clone())
            .attr("spindle.job_type", entry.job_type.clone())
            .attr("spindle.job_name", entry.name.clone())
            .attr("spindle.try", i64::from(entry.r#try))
            .attr("spindle.state", entry.state.to_string())
            .attr("spindle.exit", entry.exit);
            if !matches!(entry.state, State::Complete | State::Stopped) {
                span.error = Some(if entry.error.is_empty() {
                    entry.state.to_string()
                } else {
                    entry.error.clone()
                });
            }
            span
        });
    }

    fn backlog(&self, reports: usize) {
        if let Some(metrics) = &self.telemetry.metrics {
            let before = self.backlog.swap(reports, Ordering::Relaxed);
            let change = i64::try_from(reports).unwrap_or(i64::MAX)
                - i64::try_from(before).unwrap_or(i64::MAX);
            metrics.report_backlog.inc_by(change);
        }
    }

    fn delivery_failed(&self, kind: ReportErrorKind) {
        if let Some(metrics) = &self.telemetry.metrics {
            metrics.report_failed(kind_name(kind));
        }
    }
}
