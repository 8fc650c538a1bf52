//! The services' logs: the filter, the format, and reading the settings before anything
//! is logged.

/// A log level or filter, checked.
pub(super) fn log_filter(text: &str) -> anyhow::Result<tracing_subscriber::EnvFilter> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    // One word is a level: a filter would read it as a target and log almost nothing.
    if !text.contains(['=', ',']) && !LEVELS.contains(&text.trim().to_ascii_lowercase().as_str()) {
        anyhow::bail!(
            "log_level: {text:?} is not a level or filter; expected error, warn, info, debug or trace, or such as info,rm=debug"
        );
    }
    tracing_subscriber::EnvFilter::builder()
        .parse(text)
        .map_err(|err| {
            anyhow::anyhow!(
                "log_level: {text:?} is not a level or filter ({err}); expected error, warn, info, debug or trace, or such as info,rm=debug"
            )
        })
}

/// Logs go to stderr: text in colour only on a terminal (and not with `NO_COLOR`), so
/// that a log file or journal holds plain text; or one JSON object a line, its fields
/// and those of the spans it is in (the request's, the chain's, a hand-over's:
/// request_id, job_id, try, ...) at the top level. The level is `log_level`, else
/// `RUST_LOG`, else info.
pub(super) fn init_logging(format: LogFormat, level: Option<&str>) {
    let filter = level
        .and_then(|level| log_filter(level).ok())
        .or_else(|| tracing_subscriber::EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("info"));
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty());
    // A second init (tests run several services in one process) keeps the first.
    match format {
        LogFormat::Text => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(colour)
                .try_init();
        }
        LogFormat::Json => {
            use tracing_subscriber::layer::SubscriberExt as _;
            use tracing_subscriber::util::SubscriberInitExt as _;
            let json = json_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .flatten_event(true)
                .flatten_span_list_on_top_level(true)
                .with_current_span(false)
                .with_span_list(false);
            let _ = tracing_subscriber::registry()
                .with(filter)
                .with(json)
                .try_init();
        }
    }
}

/// How log lines are written.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Deserialize,
    serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogFormat {
    /// For people: one line each, coloured on a terminal.
    #[default]
    Text,
    /// One JSON object each, for a log collector.
    Json,
}
