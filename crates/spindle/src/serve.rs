//! `spindle server`, `spindle rm` and `spindle jr`: the services, with their configuration
//! from a YAML file, environment variables and flags (in that order of precedence).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use job::Registry;
use rm::Manager;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::exit::{Exit, eprintln_failure};
use crate::lint::load_report;
use crate::local::local;

/// Settings shared by the three commands; `None` means "not given here".
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    pub(crate) listen: Option<String>,
    pub(crate) specs: Option<PathBuf>,
    pub(crate) database: Option<String>,
    pub(crate) jr_url: Option<String>,
    pub(crate) rm_url: Option<String>,
    /// Go-style duration: how long a Job Runner has to hand back its chains at shutdown.
    pub(crate) shutdown_timeout: Option<String>,
    /// Go-style duration: how often PENDING requests and suspended chains are retried.
    pub(crate) interval: Option<String>,
    /// Go-style duration: suspended chains not resumed within it fail their request.
    pub(crate) suspended_ttl: Option<String>,
    /// Go-style duration: finished requests older than it are removed (none: kept).
    pub(crate) retention: Option<String>,
    /// Go-style duration: how long a Job Runner's registration holds without renewal.
    pub(crate) lease: Option<String>,
    /// Whether `/metrics` is served and metrics are kept (default true).
    pub(crate) metrics: Option<bool>,
    /// An OTLP/HTTP receiver (such as an OpenTelemetry collector's :4318) to export
    /// traces to; none: no traces.
    pub(crate) otlp_endpoint: Option<String>,
    /// The log level or filter (as `RUST_LOG` takes).
    pub(crate) log_level: Option<String>,
    /// Authentication and authorization; absent: none (anyone may do anything).
    pub(crate) auth: Option<AuthConfig>,
    /// The token this service presents to the others (Job Runner → Request Manager and
    /// back), when they require one.
    pub(crate) token: Option<String>,
    /// What this service trusts and presents when it calls the others over HTTPS.
    pub(crate) client: Option<ClientConfig>,
    /// HTTPS: the server's certificate and key, and the CA of its clients' certificates.
    pub(crate) tls: Option<TlsConfig>,
    /// What one client may send.
    pub(crate) limits: Option<LimitsConfig>,
}

/// The `tls:` section.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TlsConfig {
    pub(crate) cert: Option<PathBuf>,
    pub(crate) key: Option<PathBuf>,
    pub(crate) client_ca: Option<PathBuf>,
}

/// The `limits:` section.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitsConfig {
    /// Bytes of a request body (default 64 MiB).
    pub(crate) body_bytes: Option<usize>,
    /// Bytes of a request's line and headers (default 64 KiB).
    pub(crate) header_bytes: Option<usize>,
    /// Go duration to receive a request's headers (default 30s).
    pub(crate) header_timeout: Option<String>,
    /// Go duration to receive a request's body (default 60s).
    pub(crate) body_timeout: Option<String>,
}

/// The `auth:` section of a service's config file.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuthConfig {
    /// A file of token hashes, one `sha256:HEX USER [ROLE,...]` a line (`spindle token
    /// create` prints the line to add).
    pub(crate) tokens: Option<PathBuf>,
    /// Callers with one of these roles may do anything.
    #[serde(default)]
    pub(crate) admin_roles: Vec<String>,
    /// Request types without ACLs may be started and stopped by admins only.
    #[serde(default)]
    pub(crate) strict: bool,
    /// When set, only these roles (and admins, and services) may read requests.
    pub(crate) read_roles: Option<Vec<String>>,
    /// The roles of Job Runners and Request Managers (default: [spindle]).
    pub(crate) service_roles: Option<Vec<String>>,
    /// An authenticating proxy's headers, believed only from its addresses.
    pub(crate) proxy: Option<ProxyConfig>,
    /// Client certificates (with `tls.client_ca`): `roles: ou` or `roles: uri:PREFIX`.
    pub(crate) client_certificates: Option<CertificatesConfig>,
}

#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProxyConfig {
    pub(crate) user_header: String,
    pub(crate) groups_header: Option<String>,
    /// Addresses or networks (10.0.0.0/8) the proxy connects from.
    pub(crate) trusted: Vec<String>,
}

#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CertificatesConfig {
    pub(crate) roles: String,
}

/// The `client:` section: what a service trusts and presents when it calls another.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClientConfig {
    pub(crate) ca: Option<PathBuf>,
    pub(crate) cert: Option<PathBuf>,
    pub(crate) key: Option<PathBuf>,
}

/// Flags every service takes.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CommonArgs {
    /// YAML file with any of: listen, specs, database, jr_url, rm_url, shutdown_timeout,
    /// interval, suspended_ttl, retention, lease, metrics, otlp_endpoint, log_level, auth, token,
    /// client
    #[arg(long, env = "SPINDLE_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// How long a Job Runner's registration holds without renewal (Go duration; renewed
    /// every third of it; default 10s): a runner that misses it is lost and its requests
    /// run again elsewhere
    #[arg(long, env = "SPINDLE_LEASE")]
    pub(crate) lease: Option<String>,
    /// Address to listen on (port 0: one the system picks, printed at start)
    #[arg(long, env = "SPINDLE_LISTEN")]
    pub(crate) listen: Option<String>,
    /// Log lines as text or as one JSON object each (for a log collector)
    #[arg(long, env = "SPINDLE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
    /// What to log: error, warn, info (the default), debug or trace, or a filter such as
    /// `info,rm=debug`; without it `RUST_LOG` is read
    #[arg(long, env = "SPINDLE_LOG_LEVEL")]
    pub(crate) log_level: Option<String>,
    /// Keep metrics and serve them at /metrics (true, the default, or false)
    #[arg(long, env = "SPINDLE_METRICS")]
    pub(crate) metrics: Option<bool>,
    /// Export traces over OTLP/HTTP to this receiver, such as http://collector:4318
    /// (default: OTEL_EXPORTER_OTLP_ENDPOINT if set, else no traces)
    #[arg(long, env = "SPINDLE_OTLP_ENDPOINT")]
    pub(crate) otlp_endpoint: Option<String>,
    /// The token this service presents to the other services (or `token:` in the
    /// config file); prefer the environment to a flag, which others can see
    #[arg(long, env = "SPINDLE_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// Serve HTTPS with this PEM certificate (chain), with --tls-key (or `tls.cert`);
    /// reloaded when the file changes
    #[arg(long, env = "SPINDLE_TLS_CERT")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The certificate's PEM private key (or `tls.key`)
    #[arg(long, env = "SPINDLE_TLS_KEY")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Require client certificates issued by this PEM CA (mutual TLS; or
    /// `tls.client_ca`)
    #[arg(long, env = "SPINDLE_TLS_CLIENT_CA")]
    pub(crate) tls_client_ca: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

/// Flags of the services that hold a Request Manager.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ManagerArgs {
    /// Directory (or file) of request specs
    #[arg(long, env = "SPINDLE_SPECS")]
    pub(crate) specs: Option<PathBuf>,
    /// Database: sqlite://PATH or postgres://USER@HOST:PORT/DATABASE
    #[arg(long, env = "SPINDLE_DATABASE")]
    pub(crate) database: Option<String>,
    /// How often PENDING requests and suspended chains are retried (Go duration)
    #[arg(long, env = "SPINDLE_INTERVAL")]
    pub(crate) interval: Option<String>,
    /// Suspended chains not resumed within this time fail their request (Go duration)
    #[arg(long, env = "SPINDLE_SUSPENDED_TTL")]
    pub(crate) suspended_ttl: Option<String>,
    /// Remove finished requests (and their job logs) this long after they finished (Go
    /// duration, such as 720h; default: keep them)
    #[arg(long, env = "SPINDLE_RETENTION")]
    pub(crate) retention: Option<String>,
    /// Reload the specs when their files change (they are read every second); they are
    /// always reloaded on SIGHUP, linted first, the old ones kept when the new have errors
    #[arg(long, env = "SPINDLE_WATCH_SPECS")]
    pub(crate) watch_specs: bool,
}

/// `spindle server`: a Request Manager and a Job Runner in one process.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ServerArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    #[command(flatten)]
    pub(crate) manager: ManagerArgs,
    /// How long running chains have to be handed back at shutdown (Go duration)
    #[arg(long, env = "SPINDLE_SHUTDOWN_TIMEOUT")]
    pub(crate) shutdown_timeout: Option<String>,
}

/// `spindle rm`: the Request Manager alone.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RmArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    #[command(flatten)]
    pub(crate) manager: ManagerArgs,
    /// Where to send chains: a Job Runner or a load balancer before several (default:
    /// the live registered Job Runner with the fewest running requests)
    #[arg(long, env = "SPINDLE_JR_URL")]
    pub(crate) jr_url: Option<String>,
    /// How long in-flight HTTP requests have to finish at shutdown (Go duration)
    #[arg(long, env = "SPINDLE_SHUTDOWN_TIMEOUT")]
    pub(crate) shutdown_timeout: Option<String>,
}

/// `spindle jr`: a Job Runner alone.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct JrArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// The Request Managers to register and report with: one URL, or several separated by
    /// commas (whichever answers is used)
    #[arg(long, env = "SPINDLE_RM_URL")]
    pub(crate) rm_url: Option<String>,
    /// How long running chains have to be handed back at shutdown (Go duration)
    #[arg(long, env = "SPINDLE_SHUTDOWN_TIMEOUT")]
    pub(crate) shutdown_timeout: Option<String>,
}

/// The flags of one service, `None` where it does not take one or it was not given.
#[derive(Debug, Default, Clone)]
pub(crate) struct ServeArgs {
    pub(crate) config: Option<PathBuf>,
    pub(crate) listen: Option<String>,
    pub(crate) specs: Option<PathBuf>,
    pub(crate) database: Option<String>,
    pub(crate) jr_url: Option<String>,
    pub(crate) rm_url: Option<String>,
    pub(crate) shutdown_timeout: Option<String>,
    pub(crate) interval: Option<String>,
    pub(crate) suspended_ttl: Option<String>,
    pub(crate) retention: Option<String>,
    pub(crate) lease: Option<String>,
    pub(crate) metrics: Option<bool>,
    pub(crate) otlp_endpoint: Option<String>,
    pub(crate) log_level: Option<String>,
    pub(crate) token: Option<String>,
    pub(crate) tls_cert: Option<PathBuf>,
    pub(crate) tls_key: Option<PathBuf>,
    pub(crate) tls_client_ca: Option<PathBuf>,
}

impl ServeArgs {
    fn with(common: &CommonArgs, manager: Option<&ManagerArgs>) -> ServeArgs {
        ServeArgs {
            config: common.config.clone(),
            listen: common.listen.clone(),
            lease: common.lease.clone(),
            metrics: common.metrics,
            otlp_endpoint: common.otlp_endpoint.clone(),
            log_level: common.log_level.clone(),
            token: common.token.clone(),
            tls_cert: common.tls_cert.clone(),
            tls_key: common.tls_key.clone(),
            tls_client_ca: common.tls_client_ca.clone(),
            specs: manager.and_then(|m| m.specs.clone()),
            database: manager.and_then(|m| m.database.clone()),
            interval: manager.and_then(|m| m.interval.clone()),
            suspended_ttl: manager.and_then(|m| m.suspended_ttl.clone()),
            retention: manager.and_then(|m| m.retention.clone()),
            ..ServeArgs::default()
        }
    }
}

impl From<&ServerArgs> for ServeArgs {
    fn from(args: &ServerArgs) -> ServeArgs {
        ServeArgs {
            shutdown_timeout: args.shutdown_timeout.clone(),
            ..ServeArgs::with(&args.common, Some(&args.manager))
        }
    }
}

impl From<&RmArgs> for ServeArgs {
    fn from(args: &RmArgs) -> ServeArgs {
        ServeArgs {
            jr_url: args.jr_url.clone(),
            shutdown_timeout: args.shutdown_timeout.clone(),
            ..ServeArgs::with(&args.common, Some(&args.manager))
        }
    }
}

impl From<&JrArgs> for ServeArgs {
    fn from(args: &JrArgs) -> ServeArgs {
        ServeArgs {
            rm_url: args.rm_url.clone(),
            shutdown_timeout: args.shutdown_timeout.clone(),
            ..ServeArgs::with(&args.common, None)
        }
    }
}

/// Validated settings.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) listen: SocketAddr,
    pub(crate) specs: PathBuf,
    pub(crate) database: String,
    /// None: the live registered Job Runner with the fewest running requests.
    pub(crate) jr_url: Option<String>,
    /// One or more Request Managers.
    pub(crate) rm_urls: Vec<String>,
    pub(crate) shutdown_timeout: Duration,
    pub(crate) interval: Duration,
    pub(crate) suspended_ttl: Duration,
    /// None: finished requests are kept.
    pub(crate) retention: Option<Duration>,
    pub(crate) lease: Duration,
    pub(crate) metrics: bool,
    pub(crate) otlp_endpoint: Option<String>,
    /// None: `RUST_LOG`, else info.
    pub(crate) log_level: Option<String>,
    /// None: no authentication.
    pub(crate) auth: Option<AuthConfig>,
    /// What this service presents and trusts when it calls another.
    pub(crate) credentials: crate::credentials::Credentials,
    /// None: plain HTTP.
    pub(crate) tls: Option<crate::http_server::ServerTls>,
    pub(crate) limits: crate::http_server::Limits,
}

impl Settings {
    /// `http` or `https`.
    pub(crate) fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }
}

fn duration(name: &str, text: &str) -> anyhow::Result<Duration> {
    proto::duration::parse(text)
        .with_context(|| format!("{name}: {text:?} is not a duration; expected such as 30s or 1m"))
}

impl ServeArgs {
    /// Flags and environment over the file over the defaults; every value checked.
    pub(crate) fn settings(&self, default_listen: &str) -> anyhow::Result<Settings> {
        let file = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read config file {}", path.display()))?;
                serde_saphyr::from_str::<FileConfig>(&text)
                    .map_err(|err| anyhow::anyhow!("config file {}: {err}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let pick = |flag: &Option<String>, from_file: &Option<String>, default: &str| {
            flag.clone()
                .or_else(|| from_file.clone())
                .unwrap_or_else(|| default.to_owned())
        };
        let listen = pick(&self.listen, &file.listen, default_listen);
        let listen: SocketAddr = listen.parse().with_context(|| {
            format!(
                "listen: {listen:?} is not an address; expected IP:PORT such as 127.0.0.1:32308"
            )
        })?;
        let database = pick(&self.database, &file.database, "sqlite://spindle.db");
        if !(database.starts_with("sqlite:")
            || database.starts_with("postgres://")
            || database.starts_with("postgresql://"))
        {
            anyhow::bail!(
                "database: {database:?}; expected sqlite://PATH or postgres://USER@HOST:PORT/DATABASE"
            );
        }
        let url = |name: &str, value: String| -> anyhow::Result<String> {
            if !(value.starts_with("http://") || value.starts_with("https://")) {
                anyhow::bail!("{name}: {value:?} is not a URL; expected http://HOST:PORT");
            }
            Ok(value)
        };
        Ok(Settings {
            listen,
            specs: self
                .specs
                .clone()
                .or(file.specs)
                .unwrap_or_else(|| PathBuf::from("specs")),
            database,
            jr_url: self
                .jr_url
                .clone()
                .or(file.jr_url)
                .map(|value| url("jr_url", value))
                .transpose()?,
            rm_urls: pick(&self.rm_url, &file.rm_url, "http://127.0.0.1:32308")
                .split(',')
                .map(|value| url("rm_url", value.trim().to_owned()))
                .collect::<anyhow::Result<_>>()?,
            shutdown_timeout: duration(
                "shutdown_timeout",
                &pick(&self.shutdown_timeout, &file.shutdown_timeout, "20s"),
            )?,
            interval: duration("interval", &pick(&self.interval, &file.interval, "10s"))?,
            suspended_ttl: duration(
                "suspended_ttl",
                &pick(&self.suspended_ttl, &file.suspended_ttl, "1h"),
            )?,
            retention: match self.retention.clone().or(file.retention) {
                Some(text) => Some(positive("retention", duration("retention", &text)?)?),
                None => None,
            },
            lease: positive(
                "lease",
                duration("lease", &pick(&self.lease, &file.lease, "10s"))?,
            )?,
            metrics: self.metrics.or(file.metrics).unwrap_or(true),
            otlp_endpoint: self
                .otlp_endpoint
                .clone()
                .or(file.otlp_endpoint)
                .or_else(|| std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok())
                .filter(|value| !value.is_empty())
                .map(|value| url("otlp_endpoint", value))
                .transpose()?,
            log_level: self
                .log_level
                .clone()
                .or(file.log_level)
                .map(|value| log_filter(&value).map(|_| value))
                .transpose()?,
            tls: {
                let from_file = file.tls.clone().unwrap_or_default();
                let cert = self.tls_cert.clone().or(from_file.cert);
                let key = self.tls_key.clone().or(from_file.key);
                let client_ca = self.tls_client_ca.clone().or(from_file.client_ca);
                match (cert, key) {
                    (Some(cert), Some(key)) => Some(crate::http_server::ServerTls {
                        cert,
                        key,
                        client_ca,
                    }),
                    (None, None) if client_ca.is_none() => None,
                    (None, None) => anyhow::bail!(
                        "tls.client_ca needs tls.cert and tls.key: client certificates are asked for in a TLS handshake"
                    ),
                    _ => anyhow::bail!("tls: give both cert and key (PEM files), or neither"),
                }
            },
            limits: {
                let given = file.limits.clone().unwrap_or_default();
                let default = crate::http_server::Limits::default();
                crate::http_server::Limits {
                    body_bytes: given.body_bytes.unwrap_or(default.body_bytes),
                    header_bytes: given.header_bytes.unwrap_or(default.header_bytes),
                    header_timeout: match &given.header_timeout {
                        Some(text) => positive(
                            "limits.header_timeout",
                            duration("limits.header_timeout", text)?,
                        )?,
                        None => default.header_timeout,
                    },
                    body_timeout: match &given.body_timeout {
                        Some(text) => positive(
                            "limits.body_timeout",
                            duration("limits.body_timeout", text)?,
                        )?,
                        None => default.body_timeout,
                    },
                }
            },
            auth: file.auth,
            credentials: crate::credentials::Credentials {
                token: self.token.clone().or(file.token).filter(|t| !t.is_empty()),
                ca: file.client.as_ref().and_then(|c| c.ca.clone()),
                client_cert: file.client.as_ref().and_then(|c| c.cert.clone()),
                client_key: file.client.as_ref().and_then(|c| c.key.clone()),
            },
        })
    }
}

/// How long a claim on a suspended chain may go unrenewed: a Request Manager that died
/// while resuming a chain (a lost runner's, say) leaves its claim, and the chain waits
/// this long for another to take it.
pub(crate) fn stale_claim(lease: Duration, interval: Duration) -> Duration {
    (lease * 2 + interval).max(Duration::from_secs(10))
}

/// A duration that must not be zero.
fn positive(name: &str, value: Duration) -> anyhow::Result<Duration> {
    if value.is_zero() {
        anyhow::bail!("{name}: 0s; expected a positive duration such as 10s");
    }
    Ok(value)
}

/// What a runner in this process registers with beside its URL.
pub(crate) fn lease_settings(lease: Duration) -> jr::LeaseSettings {
    jr::LeaseSettings {
        lease,
        host: gethostname::gethostname().to_string_lossy().into_owned(),
        pid: std::process::id(),
    }
}

/// Whether process `pid` runs on this machine (Linux: it has a `/proc` entry).
fn process_exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Runners registered from this machine whose process is gone (a `spindle server` or
/// `spindle run` killed before): lost now, so that what they ran resumes at once rather
/// than after their lease.
pub(crate) async fn reap_dead_local_runners(manager: &rm::Manager, own_instance: &str) {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let Ok(runners) = manager.job_runners().await else {
        return;
    };
    for runner in runners {
        let gone = runner.state != proto::RunnerState::Stopped
            && runner.instance_id != own_instance
            && runner.host == host
            && runner.pid != 0
            && (runner.pid == std::process::id() || !process_exists(runner.pid));
        if gone
            && (runner.ended_at.is_none() || runner.running_requests > 0)
            && let Err(err) = manager
                .declare_lost(&runner, "its process on this machine is gone")
                .await
        {
            tracing::warn!(instance = runner.instance_id, error = %err.chain(), "recovering a dead runner's requests failed");
        }
    }
}

/// SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM can be watched");
    tokio::select! {
        _ = interrupt => {}
        _ = terminate.recv() => {}
    }
}

/// A log level or filter, checked.
fn log_filter(text: &str) -> anyhow::Result<tracing_subscriber::EnvFilter> {
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
/// (request_id, job_id, try, ...) at the top level. The level is `log_level`, else
/// `RUST_LOG`, else info.
fn init_logging(format: LogFormat, level: Option<&str>) {
    let filter = level
        .and_then(|level| log_filter(level).ok())
        .or_else(|| tracing_subscriber::EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("info"));
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => logs.with_ansi(colour).try_init(),
        LogFormat::Json => logs.json().flatten_event(true).try_init(),
    };
}

/// The service's settings, read and checked, with logging set up by them. A bad
/// setting is reported before anything starts.
fn settings_and_logs(
    args: ServeArgs,
    format: LogFormat,
    default_listen: &str,
) -> anyhow::Result<Settings> {
    let settings = args.settings(default_listen);
    init_logging(
        format,
        settings.as_ref().ok().and_then(|s| s.log_level.as_deref()),
    );
    settings
}

/// Metrics (unless off) and the trace exporter (when an endpoint is set) of a service.
fn telemetry(settings: &Settings, service: &str) -> anyhow::Result<telemetry::Telemetry> {
    let metrics = settings
        .metrics
        .then(|| Arc::new(telemetry::Metrics::new()));
    let traces = match &settings.otlp_endpoint {
        None => None,
        Some(endpoint) => {
            // The collector is not a Spindle service: it gets no token, only the CA.
            let collector = Settings {
                credentials: crate::credentials::Credentials {
                    token: None,
                    client_cert: None,
                    client_key: None,
                    ..settings.credentials.clone()
                },
                ..settings.clone()
            };
            let traces = telemetry::Traces::new(
                endpoint,
                service,
                service_http(&collector)?,
                Duration::from_millis(500),
            )?;
            tracing::info!(endpoint, "exporting traces over OTLP/HTTP");
            Some(Arc::new(traces))
        }
    };
    Ok(telemetry::Telemetry { metrics, traces })
}

/// Sends the spans still queued, at the end of a service.
async fn flush_traces(telemetry: &telemetry::Telemetry) {
    if let Some(traces) = telemetry.traces.clone() {
        let _ = tokio::task::spawn_blocking(move || traces.shutdown()).await;
    }
}

/// Specs without a request type start, but nothing can be started on them: say so.
fn warn_if_no_request_types(specs: &spec::Specs, path: &std::path::Path) {
    if specs.requests().is_empty() {
        tracing::warn!(
            specs = %path.display(),
            "the specs have no request types (no sequence with `request: true`); no request can be started"
        );
    }
}

/// Binds the service's address before anything else starts, so that a port in use ends
/// the process at once (exit 2 with the reason), and says where it listens: the port
/// the system chose for `:0` too (tests start servers that way).
async fn bind(
    what: &str,
    settings: &Settings,
    format: LogFormat,
) -> anyhow::Result<(TcpListener, SocketAddr)> {
    let listen = settings.listen;
    let scheme = settings.scheme();
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let local = listener.local_addr()?;
    let url = format!("{scheme}://{local}");
    match format {
        // Whatever RUST_LOG says, in words: the one line a service prints on its own.
        #[allow(
            clippy::print_stderr,
            reason = "the one line a service prints on its own"
        )]
        LogFormat::Text => eprintln!("{what} listening on {url}"),
        // A log collector gets only JSON lines.
        LogFormat::Json => tracing::info!(url, "{what} listening"),
    }
    if what != "spindle jr" {
        let ui = format!("{url}/");
        match format {
            #[allow(clippy::print_stderr, reason = "where the web UI is, once at start")]
            LogFormat::Text => eprintln!("web UI at {ui}"),
            LogFormat::Json => tracing::info!(url = ui, "web UI"),
        }
    }
    Ok((listener, local))
}

fn serve(
    listener: TcpListener,
    router: axum::Router,
    stop: CancellationToken,
    settings: &Settings,
) -> impl Future<Output = anyhow::Result<()>> + Send + 'static {
    let tls = settings.tls.clone();
    let limits = settings.limits;
    async move {
        crate::http_server::serve(listener, router, stop, tls, limits)
            .await
            .context("serving HTTP")
    }
}

/// The HTTP client a service reaches the other with: short connect timeout, a bound on
/// each call, HTTPS through the process's rustls provider, connections kept alive.
fn service_http(settings: &Settings) -> anyhow::Result<reqwest::Client> {
    let builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(30));
    settings
        .credentials
        .apply(builder)?
        .build()
        .context("building the HTTP client")
}

/// The Request Manager's authentication and authorization from `auth:` and the specs'
/// ACLs; `None` without an `auth:` section. Authenticators a team's binary adds come
/// first.
pub(crate) fn build_auth(
    settings: &Settings,
    specs: &spec::Specs,
    custom: &[Arc<dyn auth::Authenticator>],
) -> anyhow::Result<Option<Arc<auth::Auth>>> {
    let Some(config) = &settings.auth else {
        return Ok(None);
    };
    let mut authenticators: Vec<Arc<dyn auth::Authenticator>> = custom.to_vec();
    if let Some(path) = &config.tokens {
        let tokens =
            auth::Tokens::read(path).map_err(|err| anyhow::anyhow!("auth.tokens: {err}"))?;
        authenticators.push(Arc::new(tokens));
    }
    if let Some(certs) = &config.client_certificates {
        let roles = match certs.roles.as_str() {
            "ou" => auth::CertificateRoles::OrganizationalUnits,
            other => match other.strip_prefix("uri:") {
                Some(prefix) if !prefix.is_empty() => {
                    auth::CertificateRoles::UriPrefix(prefix.to_owned())
                }
                _ => anyhow::bail!(
                    "auth.client_certificates.roles: {other:?}; expected ou or uri:PREFIX (such as uri:spiffe://example.org/role/)"
                ),
            },
        };
        authenticators.push(Arc::new(auth::ClientCertificates { roles }));
    }
    if let Some(proxy) = &config.proxy {
        let trusted = proxy
            .trusted
            .iter()
            .map(|net| net.parse::<auth::Network>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| anyhow::anyhow!("auth.proxy.trusted: {err}"))?;
        if trusted.is_empty() {
            anyhow::bail!(
                "auth.proxy.trusted: empty; expected the proxy's addresses, such as [10.0.0.5]"
            );
        }
        authenticators.push(Arc::new(auth::Proxy {
            user_header: proxy.user_header.to_ascii_lowercase(),
            groups_header: proxy
                .groups_header
                .clone()
                .unwrap_or_else(|| "x-forwarded-groups".to_owned())
                .to_ascii_lowercase(),
            trusted,
        }));
    }
    if authenticators.is_empty() {
        anyhow::bail!(
            "auth: no way to authenticate anyone; expected tokens, proxy or client_certificates"
        );
    }
    Ok(Some(Arc::new(auth::Auth {
        authenticators,
        acls: acls_of(specs),
        admin_roles: config.admin_roles.clone(),
        strict: config.strict,
        read_roles: config.read_roles.clone(),
        service_roles: config
            .service_roles
            .clone()
            .unwrap_or_else(|| vec!["spindle".to_owned()]),
    })))
}

/// The specs' `schedules:`, ready to fire (the linter accepted them).
fn schedules_of(specs: &spec::Specs) -> Vec<spec::schedule::Fires> {
    specs
        .schedules()
        .iter()
        .filter_map(|schedule| match schedule.fires() {
            Ok(fires) => Some(fires),
            Err(err) => {
                tracing::error!(
                    schedule = schedule.name,
                    error = err,
                    "schedule not started"
                );
                None
            }
        })
        .collect()
}

/// The specs' `acl:` entries, by request type.
fn acls_of(specs: &spec::Specs) -> auth::Acls {
    let acls = specs
        .sequences()
        .iter()
        .map(|sequence| {
            let entries = sequence
                .acl
                .iter()
                .map(|acl| auth::AclEntry {
                    role: acl
                        .role
                        .as_ref()
                        .map(|r| r.value.clone())
                        .unwrap_or_default(),
                    admin: acl.admin.as_ref().is_some_and(|a| a.value),
                    ops: acl.ops.iter().map(|op| op.value.clone()).collect(),
                })
                .collect();
            (sequence.name.clone(), entries)
        })
        .collect();
    auth::Acls::new(acls)
}

/// Spec history and reloads: stores the version of the specs the Request Manager
/// started with (`started_with`, their files) before it serves, so that every request
/// records one, then (`keep_specs`) reloads them on SIGHUP (and, with `--watch-specs`, when the files
/// change: their paths, sizes and times are looked at every second, and they are read
/// and linted only when those changed). New specs are linted first; with errors the old
/// ones stay and the errors are logged. Runs until `stop`.
async fn record_specs(manager: &Manager, started_with: Vec<proto::SpecFile>) -> String {
    let first = rm::spec_version(started_with);
    if let Err(err) = manager.record_specs(&first).await {
        tracing::warn!(error = %err.chain(), "storing the specs' version failed; requests record none until a reload");
        return String::new();
    }
    first.version
}

async fn keep_specs(
    manager: Arc<Manager>,
    path: PathBuf,
    registry: Arc<Registry>,
    started_with: String,
    watch: bool,
    stop: CancellationToken,
) {
    let mut current = started_with;
    let mut rejected = String::new();
    let mut hangups = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(signal) => Some(signal),
        Err(err) => {
            tracing::warn!(error = %err, "cannot listen for SIGHUP; specs are not reloaded on it");
            None
        }
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // What the files looked like when last read (none yet: the first tick reads them, in
    // case they changed since the start): a tick whose files look the same reads and
    // lints nothing.
    let mut seen: Option<spec::Fingerprint> = None;
    loop {
        let asked = tokio::select! {
            () = stop.cancelled() => return,
            Some(()) = async { match &mut hangups { Some(h) => h.recv().await, None => std::future::pending().await } } => true,
            _ = tick.tick(), if watch => false,
        };
        let now = spec::fingerprint(std::slice::from_ref(&path)).ok();
        if !asked && now.is_some() && now == seen {
            continue;
        }
        seen = now;
        let report = match crate::lint::lint_report(&path, Some(&registry)) {
            Ok(report) => report,
            Err(err) => {
                tracing::error!(path = %path.display(), error = %err, "reading the specs failed; the loaded ones stay");
                continue;
            }
        };
        let version = rm::spec_version(report.sources.clone());
        if version.version == current {
            if asked {
                tracing::info!(version = current, "specs unchanged");
            }
            continue;
        }
        if report.has_errors() {
            if asked || version.version != rejected {
                let first_error = report
                    .diagnostics
                    .iter()
                    .find(|d| d.severity == spec::Severity::Error)
                    .map(|d| d.to_string())
                    .unwrap_or_default();
                tracing::error!(
                    errors = report.n_errors(),
                    first = first_error,
                    kept = current,
                    "the new specs have errors; the loaded ones stay"
                );
                rejected.clone_from(&version.version);
            }
            continue;
        }
        let acls = acls_of(&report.specs);
        let schedules = schedules_of(&report.specs);
        let grapher = graph::Grapher::new(report.specs, registry.clone());
        match manager.load_specs(grapher, &version, Some(acls)).await {
            Ok(()) => {
                manager.set_schedules(schedules);
                tracing::info!(
                    old = current,
                    new = version.version,
                    files = version.files.len(),
                    "specs reloaded"
                );
                current = version.version;
            }
            Err(err) => {
                tracing::error!(error = %err.chain(), "storing the new specs failed; the loaded ones stay");
            }
        }
    }
}

/// The Job Runner's: only service callers, by the same authenticators (no ACLs).
fn build_runner_auth(settings: &Settings) -> anyhow::Result<Option<Arc<auth::Auth>>> {
    build_auth(settings, &spec::Specs::default(), &[])
}

/// Says so when a service without authentication listens beyond this machine.
fn warn_if_open(settings: &Settings, what: &str) {
    if settings.auth.is_none() && !settings.listen.ip().is_loopback() {
        tracing::warn!(
            listen = %settings.listen,
            "{what}: authentication is off (no auth: in the config file): anyone who can reach {} can start and stop any request",
            settings.listen
        );
    }
}

/// Waits for SIGINT or SIGTERM (`None`); a server that ended before, which only an error
/// does, ends the wait with its result.
async fn until_shutdown(
    server: &mut tokio::task::JoinHandle<anyhow::Result<()>>,
) -> Option<anyhow::Result<()>> {
    tokio::select! {
        () = shutdown_signal() => None,
        ended = server => Some(ended.map_err(anyhow::Error::from).and_then(|res| res)),
    }
}

/// `spindle server`: Request Manager and Job Runner in one process.
pub(crate) async fn server(args: &ServerArgs, registry: Registry) -> anyhow::Result<Exit> {
    let settings = settings_and_logs(
        ServeArgs::from(args),
        args.common.log_format,
        "127.0.0.1:32308",
    )?;
    let Some(report) = load_report(&settings.specs, Some(&registry))? else {
        eprintln_failure("the specs have errors; not starting");
        return Ok(Exit::Failure);
    };
    let (specs, sources) = (report.specs, report.sources);
    warn_if_no_request_types(&specs, &settings.specs);
    let auth = build_auth(&settings, &specs, crate::custom_authenticators())?;
    let schedules = schedules_of(&specs);
    let reload_registry = Arc::new(registry.clone());
    let (listener, address) = bind("spindle server", &settings, args.common.log_format).await?;
    warn_if_open(&settings, "spindle server");
    let base_url = format!("{}://{address}", settings.scheme());
    let telemetry = telemetry(&settings, "spindle-server")?;
    let local = local(
        specs,
        registry,
        crate::local::LocalSettings {
            store: store::open(&settings.database).await?,
            base_url: &base_url,
            interval: settings.interval,
            suspended_ttl: settings.suspended_ttl,
            lease: settings.lease,
            telemetry: telemetry.clone(),
            auth,
            retention: settings.retention,
        },
    )
    .await?;
    local.manager.set_schedules(schedules);
    // What a killed predecessor on this machine ran resumes at once.
    reap_dead_local_runners(&local.manager, &local.runner.instance()).await;
    let stop = CancellationToken::new();
    let stop_lease = CancellationToken::new();
    let lease = tokio::spawn(jr::lease::hold(
        local.runner.clone(),
        Arc::new(crate::local::ManagerRegistry(local.manager.clone())),
        lease_settings(settings.lease),
        stop_lease.clone(),
    ));
    let started_with = record_specs(&local.manager, sources).await;
    let background = tokio::spawn(local.manager.clone().run_background(stop.clone()));
    tokio::spawn(keep_specs(
        local.manager.clone(),
        settings.specs.clone(),
        reload_registry,
        started_with,
        args.manager.watch_specs,
        stop.clone(),
    ));
    let router = rm::router(local.manager.clone()).merge(ui::router(local.manager.clone()));
    let mut server = tokio::spawn(serve(listener, router, stop.clone(), &settings));
    if let Some(ended) = until_shutdown(&mut server).await {
        stop.cancel();
        stop_lease.cancel();
        return ended.map(|()| Exit::Success);
    }
    tracing::info!("shutting down: suspending running chains");
    local.manager.shut_down();
    local.runner.shut_down(settings.shutdown_timeout).await;
    stop_lease.cancel();
    let _ = lease.await;
    stop.cancel();
    let _ = background.await;
    finish_serving(server, settings.shutdown_timeout).await?;
    flush_traces(&telemetry).await;
    Ok(Exit::Success)
}

/// Waits for the HTTP server to finish the requests in flight, at most `timeout`.
async fn finish_serving(
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
    timeout: Duration,
) -> anyhow::Result<()> {
    match tokio::time::timeout(timeout, server).await {
        Ok(ended) => ended?,
        Err(_) => {
            tracing::warn!(
                timeout = %proto::duration::format(timeout),
                "requests still in flight at the shutdown timeout were cut off"
            );
            Ok(())
        }
    }
}

/// `spindle rm`: the Request Manager alone, sending chains to Job Runners over HTTP.
pub(crate) async fn request_manager(args: &RmArgs, registry: Registry) -> anyhow::Result<Exit> {
    let settings = settings_and_logs(
        ServeArgs::from(args),
        args.common.log_format,
        "127.0.0.1:32308",
    )?;
    let Some(report) = load_report(&settings.specs, Some(&registry))? else {
        eprintln_failure("the specs have errors; not starting");
        return Ok(Exit::Failure);
    };
    let (specs, sources) = (report.specs, report.sources);
    warn_if_no_request_types(&specs, &settings.specs);
    let auth = build_auth(&settings, &specs, crate::custom_authenticators())?;
    let schedules = schedules_of(&specs);
    let (listener, address) = bind("spindle rm", &settings, args.common.log_format).await?;
    warn_if_open(&settings, "spindle rm");
    let store = store::open(&settings.database).await?;
    let registry = Arc::new(registry);
    let grapher = graph::Grapher::new(specs, registry.clone());
    let options = rm::Options {
        interval: settings.interval,
        suspended_ttl: settings.suspended_ttl,
        host: format!(
            "{}:{}",
            gethostname::gethostname().to_string_lossy(),
            address.port()
        ),
        lease: settings.lease,
        jr_url: settings.jr_url.clone(),
        stale_claim: stale_claim(settings.lease, settings.interval),
        telemetry: telemetry(&settings, "spindle-rm")?,
        auth,
        retention: settings.retention,
    };
    let manager = Arc::new(Manager::new(
        grapher,
        store,
        Arc::new(rm::HttpJrClient::new(service_http(&settings)?)),
        options,
    ));
    manager.set_schedules(schedules);
    let stop = CancellationToken::new();
    let started_with = record_specs(&manager, sources).await;
    let background = tokio::spawn(manager.clone().run_background(stop.clone()));
    tokio::spawn(keep_specs(
        manager.clone(),
        settings.specs.clone(),
        registry,
        started_with,
        args.manager.watch_specs,
        stop.clone(),
    ));
    let router = rm::router(manager.clone()).merge(ui::router(manager.clone()));
    let mut server = tokio::spawn(serve(listener, router, stop.clone(), &settings));
    if let Some(ended) = until_shutdown(&mut server).await {
        stop.cancel();
        return ended.map(|()| Exit::Success);
    }
    tracing::info!("shutting down: finishing the requests in flight");
    manager.shut_down();
    stop.cancel();
    let _ = background.await;
    finish_serving(server, settings.shutdown_timeout).await?;
    flush_traces(manager.telemetry()).await;
    Ok(Exit::Success)
}

/// `spindle jr`: a Job Runner, reporting to a Request Manager over HTTP.
pub(crate) async fn job_runner(args: &JrArgs, registry: Registry) -> anyhow::Result<Exit> {
    let settings = settings_and_logs(
        ServeArgs::from(args),
        args.common.log_format,
        "127.0.0.1:32307",
    )?;
    let (listener, address) = bind("spindle jr", &settings, args.common.log_format).await?;
    let rm = jr::HttpRmClient::new(&settings.rm_urls, service_http(&settings)?);
    let base_url = format!("{}://{address}", settings.scheme());
    let runner = jr::Runner::new(
        Arc::new(registry),
        Arc::new(rm.clone()),
        &base_url,
        chain::Options::default(),
        telemetry(&settings, "spindle-jr")?,
    );
    let stop_lease = CancellationToken::new();
    let lease = tokio::spawn(jr::lease::hold(
        runner.clone(),
        Arc::new(rm),
        lease_settings(settings.lease),
        stop_lease.clone(),
    ));
    let stop = CancellationToken::new();
    let router = jr::router(runner.clone(), &proto::version());
    let router = match build_runner_auth(&settings)? {
        Some(auth) => jr::with_auth(router, auth),
        None => router,
    };
    warn_if_open(&settings, "spindle jr");
    let mut server = tokio::spawn(serve(listener, router, stop.clone(), &settings));
    if let Some(ended) = until_shutdown(&mut server).await {
        stop.cancel();
        stop_lease.cancel();
        return ended.map(|()| Exit::Success);
    }
    tracing::info!(
        n_chains = runner.n_chains(),
        "shutting down: suspending running chains"
    );
    runner.shut_down(settings.shutdown_timeout).await;
    stop_lease.cancel();
    let _ = lease.await;
    stop.cancel();
    server.await??;
    flush_traces(runner.telemetry()).await;
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The observability settings are checked like the others, with what was expected.
    #[test]
    fn observability_settings_are_checked() {
        let args = |otlp: Option<&str>, level: Option<&str>| ServeArgs {
            otlp_endpoint: otlp.map(str::to_owned),
            log_level: level.map(str::to_owned),
            metrics: Some(false),
            ..ServeArgs::default()
        };
        let settings = args(Some("http://c:4318"), Some("info,rm=debug"))
            .settings("127.0.0.1:1")
            .unwrap();
        assert!(!settings.metrics);
        assert_eq!(settings.otlp_endpoint.as_deref(), Some("http://c:4318"));
        let err = args(Some("c:4318"), None)
            .settings("127.0.0.1:1")
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("otlp_endpoint: \"c:4318\" is not a URL; expected http://"),
            "{err}"
        );
        for bad in ["loud", "rm=loud"] {
            let err = args(None, Some(bad)).settings("127.0.0.1:1").unwrap_err();
            assert!(
                err.to_string()
                    .starts_with(&format!("log_level: {bad:?} is not a level or filter")),
                "{err}"
            );
        }
    }

    /// A team's own authenticator (`main_with_authenticators`) is asked first; the specs'
    /// ACLs and the `auth:` settings apply to whom it names.
    #[test]
    fn a_teams_own_authenticator_comes_first() {
        #[derive(Debug)]
        struct Header;
        impl auth::Authenticator for Header {
            fn authenticate(
                &self,
                headers: &axum::http::HeaderMap,
                _: &auth::Peer,
            ) -> Result<Option<auth::Caller>, auth::Denied> {
                Ok(headers.get("x-team-user").map(|user| auth::Caller {
                    name: user.to_str().unwrap_or_default().to_owned(),
                    roles: vec!["deployer".to_owned()],
                    via: auth::Via::Custom,
                }))
            }
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tokens"), "").unwrap();
        let config = dir.path().join("rm.yaml");
        std::fs::write(
            &config,
            format!("auth:\n  tokens: {}\n", dir.path().join("tokens").display()),
        )
        .unwrap();
        let settings = ServeArgs {
            config: Some(config),
            ..ServeArgs::default()
        }
        .settings("127.0.0.1:1")
        .unwrap();
        let report = spec::lint_str(
            std::path::Path::new("s.yaml"),
            "sequences:\n  deploy:\n    request: true\n    acl:\n      - role: deployer\n        ops: [start]\n    nodes:\n      a:\n        category: job\n        type: noop\n",
        );
        let custom: Vec<Arc<dyn auth::Authenticator>> = vec![Arc::new(Header)];
        let auth = build_auth(&settings, &report.specs, &custom)
            .unwrap()
            .unwrap();
        let mut headers = axum::http::HeaderMap::new();
        headers.insert("x-team-user", "carol".parse().unwrap());
        let caller = auth.authenticate(&headers, &auth::Peer::default()).unwrap();
        assert_eq!(
            (caller.name.as_str(), caller.via),
            ("carol", auth::Via::Custom)
        );
        assert_eq!(auth.authorize(&caller, "start", "deploy"), Ok(()));
        assert!(auth.authorize(&caller, "stop", "deploy").is_err());
        // Without its header, the tokens are asked, and there is none.
        assert!(
            auth.authenticate(&axum::http::HeaderMap::new(), &auth::Peer::default())
                .is_err()
        );
        // An auth: section that can authenticate no one is refused at start.
        std::fs::write(dir.path().join("empty.yaml"), "auth:\n  strict: true\n").unwrap();
        let settings = ServeArgs {
            config: Some(dir.path().join("empty.yaml")),
            ..ServeArgs::default()
        }
        .settings("127.0.0.1:1")
        .unwrap();
        let err = build_auth(&settings, &report.specs, &[]).unwrap_err();
        assert!(
            err.to_string().contains("no way to authenticate anyone"),
            "{err}"
        );
    }

    /// docs/examples' config files are what the services read, every value checked.
    #[test]
    fn the_documented_example_configs_are_valid() {
        let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples");
        for (file, listen) in [
            ("server.yaml", "127.0.0.1:32308"),
            ("rm.yaml", "0.0.0.0:32308"),
            ("jr.yaml", "0.0.0.0:32307"),
        ] {
            let args = ServeArgs {
                config: Some(examples.join(file)),
                ..ServeArgs::default()
            };
            let settings = args
                .settings("127.0.0.1:1")
                .unwrap_or_else(|err| panic!("{file}: {err:#}"));
            assert_eq!(settings.listen.to_string(), listen, "{file}");
        }
        let rm = ServeArgs {
            config: Some(examples.join("rm.yaml")),
            ..ServeArgs::default()
        }
        .settings("127.0.0.1:1")
        .unwrap();
        assert!(rm.database.starts_with("postgres://"));
        assert_eq!(rm.jr_url.as_deref(), Some("http://jr.example.com:32307"));
        assert!(rm.metrics);
        assert_eq!(
            rm.otlp_endpoint.as_deref(),
            Some("http://otel-collector.example.com:4318")
        );
        assert_eq!(rm.log_level.as_deref(), Some("info"));
        // The secured ones: TLS, authentication, client credentials, limits.
        for file in ["secure-rm.yaml", "secure-jr.yaml"] {
            let settings = ServeArgs {
                config: Some(examples.join(file)),
                ..ServeArgs::default()
            }
            .settings("127.0.0.1:1")
            .unwrap_or_else(|err| panic!("{file}: {err:#}"));
            assert_eq!(settings.scheme(), "https", "{file}");
            assert!(settings.tls.as_ref().unwrap().client_ca.is_some(), "{file}");
            let auth = settings.auth.as_ref().unwrap();
            assert_eq!(auth.client_certificates.as_ref().unwrap().roles, "ou");
            assert!(settings.credentials.client_cert.is_some(), "{file}");
        }
        let secure = ServeArgs {
            config: Some(examples.join("secure-rm.yaml")),
            ..ServeArgs::default()
        }
        .settings("127.0.0.1:1")
        .unwrap();
        let auth = secure.auth.unwrap();
        assert!(auth.strict);
        assert_eq!(auth.admin_roles, ["sre"]);
        assert_eq!(auth.proxy.unwrap().trusted, ["10.0.0.5", "10.0.1.0/24"]);
        assert_eq!(secure.limits.header_timeout, Duration::from_secs(30));
    }
}
