//! What Spindle tells operators about itself: Prometheus metrics ([`Metrics`], served at
//! `/metrics`) and OpenTelemetry traces ([`Traces`], exported over OTLP). The services
//! take a [`Telemetry`]; either part may be off.

pub mod metrics;
pub mod service;
pub mod traces;

use std::sync::Arc;

pub use metrics::Metrics;
pub use traces::{Span, SpanContext, Traces};

/// The metrics and the trace exporter a service reports to; `None` is off.
#[derive(Debug, Clone, Default)]
pub struct Telemetry {
    pub metrics: Option<Arc<Metrics>>,
    pub traces: Option<Arc<Traces>>,
}

impl Telemetry {
    /// Metrics on, traces off.
    pub fn with_metrics() -> Telemetry {
        Telemetry {
            metrics: Some(Arc::new(Metrics::new())),
            traces: None,
        }
    }

    /// Queues `span` for export if traces are on; `make` is not called otherwise.
    pub fn span(&self, make: impl FnOnce() -> Span) {
        if let Some(traces) = &self.traces {
            traces.emit(make());
        }
    }
}
