//! The services' configuration: the config file, the flags and the environment, and the
//! validated settings made of them.

use super::*;

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

pub(super) fn duration(name: &str, text: &str) -> anyhow::Result<Duration> {
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
            tls: self.tls(file.tls.clone().unwrap_or_default())?,
            limits: limits(file.limits.clone().unwrap_or_default())?,
            auth: file.auth,
            credentials: crate::credentials::Credentials {
                token: self.token.clone().or(file.token).filter(|t| !t.is_empty()),
                ca: file.client.as_ref().and_then(|c| c.ca.clone()),
                client_cert: file.client.as_ref().and_then(|c| c.cert.clone()),
                client_key: file.client.as_ref().and_then(|c| c.key.clone()),
            },
        })
    }

    /// HTTPS: the flags' certificate, key and client CA over the file's.
    fn tls(&self, from_file: TlsConfig) -> anyhow::Result<Option<crate::http_server::ServerTls>> {
        let cert = self.tls_cert.clone().or(from_file.cert);
        let key = self.tls_key.clone().or(from_file.key);
        let client_ca = self.tls_client_ca.clone().or(from_file.client_ca);
        Ok(match (cert, key) {
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
        })
    }
}

/// How long a claim on a suspended chain may go unrenewed: a Request Manager that died
/// while resuming a chain (a lost runner's, say) leaves its claim, and the chain waits
/// this long for another to take it.
pub(crate) fn stale_claim(lease: Duration, interval: Duration) -> Duration {
    (lease * 2 + interval).max(Duration::from_secs(10))
}

/// The `limits:` section, checked, over the defaults.
fn limits(given: LimitsConfig) -> anyhow::Result<crate::http_server::Limits> {
    let default = crate::http_server::Limits::default();
    let timeout = |name: &str, given: &Option<String>, default: Duration| match given {
        Some(text) => positive(name, duration(name, text)?),
        None => Ok(default),
    };
    Ok(crate::http_server::Limits {
        body_bytes: given.body_bytes.unwrap_or(default.body_bytes),
        header_bytes: given.header_bytes.unwrap_or(default.header_bytes),
        header_timeout: timeout(
            "limits.header_timeout",
            &given.header_timeout,
            default.header_timeout,
        )?,
        body_timeout: timeout(
            "limits.body_timeout",
            &given.body_timeout,
            default.body_timeout,
        )?,
    })
}

/// A duration that must not be zero.
pub(super) fn positive(name: &str, value: Duration) -> anyhow::Result<Duration> {
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
