//! OpenTelemetry traces, exported over OTLP/HTTP (protobuf) when `otlp_endpoint` is set.
//!
//! A request is one trace from its creation to its final state, whichever processes it
//! crosses and however often they restart: its trace id and the id of its root span are
//! derived from the request id ([`request_root`]), so the Request Manager that creates a
//! request, the ones that hand it over and the one that stores its final state (which
//! emits the root span, from the creation time to the finish time) agree without storing
//! anything. A hand-over carries its span to the Job Runner in a W3C `traceparent` header;
//! the runner's span of the chain is its child, and each job try a child of that.
//!
//! Spindle knows each span's start and end when it emits it (a try's are in its job log
//! entry), so spans are built as finished [`SpanData`] and given to the SDK's batch span
//! processor and OTLP exporter directly: the SDK's tracer cannot take a span id chosen
//! by its caller, which the deterministic root needs.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use opentelemetry::trace::{
    SpanContext as OtelContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SpanData, SpanEvents, SpanLinks, SpanProcessor as _,
};

/// Why traces could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("otlp_endpoint {endpoint:?}: {message}")]
pub struct Error {
    pub endpoint: String,
    pub message: String,
}

/// Where a span sits: its trace and its own id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanContext {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
}

impl SpanContext {
    /// The W3C `traceparent` header value naming this span as the parent (sampled).
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-01", hex(&self.trace_id), hex(&self.span_id))
    }

    /// Reads a W3C `traceparent` value (version 00); `None` when it is not one.
    pub fn from_traceparent(value: &str) -> Option<SpanContext> {
        let mut parts = value.trim().split('-');
        let (version, trace, span, _flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version != "00" || parts.next().is_some() {
            return None;
        }
        let trace_id: [u8; 16] = unhex(trace)?;
        let span_id: [u8; 8] = unhex(span)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(SpanContext { trace_id, span_id })
    }

    /// A new span in the same trace (a random span id).
    pub fn child(&self) -> SpanContext {
        SpanContext {
            trace_id: self.trace_id,
            span_id: new_span_id(),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != N * 2 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[i * 2..i * 2 + 2], 16).ok()?;
    }
    Some(out)
}

/// 64-bit FNV-1a of `text` from `seed`: stable across versions and machines, which the
/// ids derived from a request id need (std's hasher is not).
fn fnv1a(seed: u64, text: &str) -> u64 {
    text.bytes().fold(seed, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A request's trace and the id of its root span, the same in every process.
pub fn request_root(request_id: &str) -> SpanContext {
    let high = fnv1a(0xcbf2_9ce4_8422_2325, request_id);
    let low = fnv1a(0x84222325_cbf29ce4, request_id);
    let mut trace_id = [0u8; 16];
    trace_id[..8].copy_from_slice(&high.to_be_bytes());
    trace_id[8..].copy_from_slice(&low.to_be_bytes());
    let span = fnv1a(0x9ce4_8422_2325_cbf2, request_id).max(1);
    SpanContext {
        trace_id,
        span_id: span.to_be_bytes(),
    }
}

/// A random, non-zero span id.
pub fn new_span_id() -> [u8; 8] {
    rand::random::<u64>().max(1).to_be_bytes()
}

/// Whether a span is a server's, a client's call or internal work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Internal,
    Server,
    Client,
}

/// A finished span to export.
#[derive(Debug, Clone)]
pub struct Span {
    pub name: &'static str,
    pub context: SpanContext,
    /// The parent span's id (in the same trace); `None` for a root.
    pub parent: Option<[u8; 8]>,
    /// The parent is another process's (it came in a `traceparent`).
    pub remote_parent: bool,
    pub kind: Kind,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<(&'static str, Value)>,
    /// Set when the span's work failed: the span's status is then an error with it.
    pub error: Option<String>,
}

impl Span {
    pub fn new(name: &'static str, context: SpanContext, parent: Option<[u8; 8]>) -> Span {
        let now = SystemTime::now();
        Span {
            name,
            context,
            parent,
            remote_parent: false,
            kind: Kind::Internal,
            start: now,
            end: now,
            attributes: Vec::new(),
            error: None,
        }
    }

    pub fn attr(mut self, key: &'static str, value: impl Into<Value>) -> Span {
        self.attributes.push((key, value.into()));
        self
    }

    pub fn times(mut self, start: SystemTime, end: SystemTime) -> Span {
        self.start = start;
        self.end = end.max(start);
        self
    }
}

/// Unix nanoseconds (as in job log entries) as a time.
pub fn from_unix_nanos(nanos: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_nanos(u64::try_from(nanos).unwrap_or(0))
}

/// The exporter of one process's spans.
pub struct Traces {
    processor: BatchSpanProcessor,
    scope: InstrumentationScope,
}

impl std::fmt::Debug for Traces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traces").finish_non_exhaustive()
    }
}

/// The export's HTTP client: the service's reqwest client, its calls run on the
/// service's tokio runtime (the batch processor exports from a thread of its own).
#[derive(Debug)]
struct OnRuntime {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, HttpError> {
        let http = self.http.clone();
        let (parts, body) = request.into_parts();
        let call = self.runtime.spawn(async move {
            let answer = http
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await?;
            let status = answer.status();
            let headers = answer.headers().clone();
            let body = answer.bytes().await?;
            let mut response = http::Response::new(body);
            *response.status_mut() = status;
            *response.headers_mut() = headers;
            Ok::<_, reqwest::Error>(response)
        });
        Ok(call.await??)
    }
}

/// The full OTLP/HTTP traces URL of an endpoint given as the collector's base URL
/// (`http://collector:4318`, as OTEL_EXPORTER_OTLP_ENDPOINT is) or already as the
/// traces URL.
pub fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

impl Traces {
    /// Exports to `endpoint` (OTLP over HTTP, protobuf) as service `service`, batching
    /// spans every `delay`. Must be called inside a tokio runtime.
    pub fn new(
        endpoint: &str,
        service: &str,
        http: reqwest::Client,
        delay: Duration,
    ) -> Result<Traces, Error> {
        let fail = |message: String| Error {
            endpoint: endpoint.to_owned(),
            message,
        };
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(fail(
                "not a URL; expected http://HOST:PORT (an OTLP/HTTP receiver such as a collector's :4318)".to_owned(),
            ));
        }
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|err| fail(format!("no async runtime: {err}")))?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(traces_url(endpoint))
            .with_timeout(Duration::from_secs(10))
            .with_http_client(OnRuntime { http, runtime })
            .build()
            .map_err(|err| fail(err.to_string()))?;
        let mut processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_scheduled_delay(delay)
                    .with_max_queue_size(65_536)
                    .build(),
            )
            .build();
        let resource = Resource::builder_empty()
            .with_service_name(service.to_owned())
            .with_attributes([KeyValue::new("service.version", proto::version())])
            .build();
        processor.set_resource(&resource);
        Ok(Traces {
            processor,
            scope: InstrumentationScope::builder("spindle")
                .with_version(proto::version())
                .build(),
        })
    }

    /// Queues a finished span for export (never blocks; a full queue drops it).
    pub fn emit(&self, span: Span) {
        let context = OtelContext::new(
            TraceId::from_bytes(span.context.trace_id),
            SpanId::from_bytes(span.context.span_id),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        let status = match span.error {
            Some(message) => Status::error(message),
            None => Status::Unset,
        };
        self.processor.on_end(SpanData {
            span_context: context,
            parent_span_id: span.parent.map_or(SpanId::INVALID, SpanId::from_bytes),
            parent_span_is_remote: span.remote_parent,
            span_kind: match span.kind {
                Kind::Internal => SpanKind::Internal,
                Kind::Server => SpanKind::Server,
                Kind::Client => SpanKind::Client,
            },
            name: Cow::Borrowed(span.name),
            start_time: span.start,
            end_time: span.end,
            attributes: span
                .attributes
                .into_iter()
                .map(|(key, value)| KeyValue::new(key, value))
                .collect(),
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status,
            instrumentation_scope: self.scope.clone(),
        });
    }

    /// Exports what is queued and stops. Blocks: call it from a blocking thread.
    pub fn shutdown(&self) {
        if let Err(err) = self.processor.shutdown() {
            tracing::warn!(error = %err, "exporting the last spans failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_rejects_what_is_not_one() {
        let context = request_root("d4g5b4i4k8ajq0eplhr0");
        let header = context.traceparent();
        assert_eq!(header.len(), 55, "{header}");
        assert!(header.starts_with("00-") && header.ends_with("-01"));
        assert_eq!(SpanContext::from_traceparent(&header), Some(context));
        for bad in [
            "",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319z-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
        ] {
            assert_eq!(SpanContext::from_traceparent(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_request_has_one_trace_whoever_derives_it() {
        let a = request_root("d4g5b4i4k8ajq0eplhr0");
        assert_eq!(a, request_root("d4g5b4i4k8ajq0eplhr0"));
        let b = request_root("d4g5b4i4k8ajq0eplhr1");
        assert_ne!(a.trace_id, b.trace_id);
        assert_ne!(a.span_id, b.span_id);
        let child = a.child();
        assert_eq!(child.trace_id, a.trace_id);
        assert_ne!(child.span_id, a.span_id);
    }

    #[test]
    fn the_traces_url_is_the_base_plus_v1_traces() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
    }
}
