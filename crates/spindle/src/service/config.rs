//! The services' configuration: the config file, the flags and the environment, and the
//! validated settings made of them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;

use super::logging::{LogFormat, init_logging, log_filter};

/// The configuration: the config file's keys, each written once. The keys flags also
/// set are the fields of the flag groups ([`CommonArgs`], [`ManagerArgs`], [`RunnerArgs`],
/// [`ShutdownArgs`], [`SendsArgs`], [`ReportsArgs`]), which clap fills from flags and the
/// environment and serde from the file; the sections only the file sets are here. `None`
/// means "not given here". A command's arguments are serialized into these keys and laid
/// over the file's (`under`), so that each setting is merged in one place.
#[derive(Debug, Default, Clone, serde::Deserialize, serde::Serialize)]
pub(crate) struct FileConfig {
    #[serde(flatten)]
    pub(crate) common: CommonArgs,
    #[serde(flatten)]
    pub(crate) manager: ManagerArgs,
    #[serde(flatten)]
    pub(crate) runner: RunnerArgs,
    #[serde(flatten)]
    pub(crate) sends: SendsArgs,
    #[serde(flatten)]
    pub(crate) reports: ReportsArgs,
    /// Job Runners named by URL beside the registered ones (Spin Cycle's, with the job
    /// types compiled into them): a Request Manager's chains go to one that has their
    /// types.
    pub(crate) runners: Option<Vec<RunnerConfig>>,
    /// Authentication and authorization; absent: none (anyone may do anything).
    pub(crate) auth: Option<AuthConfig>,
    /// What this service trusts and presents when it calls the others over HTTPS.
    pub(crate) client: Option<ClientConfig>,
    /// What one client may send.
    pub(crate) limits: Option<LimitsConfig>,
    /// Job programs: job types served by programs in any language (docs/job-protocol.md).
    pub(crate) jobs: Option<Vec<job::external::ProgramConfig>>,
    /// Triggers: events from other systems that start requests (Request Managers).
    pub(crate) triggers: Option<Vec<rm::triggers::TriggerConfig>>,
    /// Notifications: webhooks told of ends, approvals and lost runners (Request Managers).
    pub(crate) notify: Option<rm::notify::NotifyConfig>,
    /// Secret args: the keys they are encrypted with, and sources a create may name
    /// (Request Managers).
    pub(crate) secrets: Option<rm::secrets::SecretsConfig>,
}

impl FileConfig {
    /// Every key of the file, as the fields above name them (the flag groups' too).
    pub(crate) fn keys() -> Vec<String> {
        match serde_json::to_value(FileConfig::default()) {
            Ok(serde_json::Value::Object(keys)) => keys.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }
}

/// One entry of `runners:`: a Job Runner that does not register (a Spin Cycle Job
/// Runner), by its URL, with the job types it has.
#[derive(Debug, Default, Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunnerConfig {
    pub(crate) url: String,
    /// The job types it has (a Spin Cycle runner's compiled-in factory's, `noop` among
    /// them); absent: any (it refuses a chain of types it lacks, as Spindle's do).
    pub(crate) types: Option<Vec<String>>,
}

/// The `limits:` section.
#[derive(Debug, Default, Clone, serde::Deserialize, serde::Serialize)]
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
#[derive(Debug, Default, Clone, serde::Deserialize, serde::Serialize)]
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
    /// The roles that may read `/metrics` and `/readyz` and nothing more (default:
    /// [metrics]): a Prometheus' token.
    pub(crate) metrics_roles: Option<Vec<String>>,
    /// An authenticating proxy's headers, believed only from its addresses.
    pub(crate) proxy: Option<ProxyConfig>,
    /// Client certificates (with `tls.client_ca`): `roles: ou` or `roles: uri:PREFIX`.
    pub(crate) client_certificates: Option<CertificatesConfig>,
    /// An OpenID Connect provider: the web UI's single sign-on, and its tokens taken by
    /// the API.
    pub(crate) oidc: Option<auth::oidc::OidcConfig>,
}

#[derive(Debug, Default, Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProxyConfig {
    pub(crate) user_header: String,
    pub(crate) groups_header: Option<String>,
    /// Addresses or networks (10.0.0.0/8) the proxy connects from.
    pub(crate) trusted: Vec<String>,
}

#[derive(Debug, Default, Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CertificatesConfig {
    pub(crate) roles: String,
}

/// The `client:` section: what a service trusts and presents when it calls another.
#[derive(Debug, Default, Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClientConfig {
    pub(crate) ca: Option<PathBuf>,
    pub(crate) cert: Option<PathBuf>,
    pub(crate) key: Option<PathBuf>,
}

/// Flags every service takes, and their keys in the file.
#[derive(Debug, Default, Clone, clap::Args, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub(crate) struct CommonArgs {
    /// YAML file with any of: listen, advertise_url, specs, database, jr_url, runners, rm_url, shutdown_timeout,
    /// interval, suspended_ttl, retention, max_backlog, lease, metrics, otlp_endpoint, log_level,
    /// log_format, watch_specs, auth, token, client, tls, limits, jobs, triggers, notify, secrets
    #[arg(long, env = "SPINDLE_CONFIG")]
    #[serde(skip)]
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
    #[arg(long, env = "SPINDLE_LOG_FORMAT", value_enum)]
    pub(crate) log_format: Option<LogFormat>,
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
    /// The file's `tls:` section.
    #[command(flatten)]
    pub(crate) tls: TlsConfig,
}

/// HTTPS: the server's certificate and key, and the CA of its clients' certificates
/// (`tls:` in the file, `--tls-*` flags).
#[derive(Debug, Default, Clone, clap::Args, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TlsConfig {
    /// Serve HTTPS with this PEM certificate (chain), with --tls-key (or `tls.cert`);
    /// reloaded when the file changes
    #[arg(long = "tls-cert", env = "SPINDLE_TLS_CERT")]
    pub(crate) cert: Option<PathBuf>,
    /// The certificate's PEM private key (or `tls.key`)
    #[arg(long = "tls-key", env = "SPINDLE_TLS_KEY")]
    pub(crate) key: Option<PathBuf>,
    /// Require client certificates issued by this PEM CA (mutual TLS; or
    /// `tls.client_ca`)
    #[arg(long = "tls-client-ca", env = "SPINDLE_TLS_CLIENT_CA")]
    pub(crate) client_ca: Option<PathBuf>,
}

/// Flags of the services that hold a Request Manager, and their keys in the file.
#[derive(Debug, Default, Clone, clap::Args, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub(crate) struct ManagerArgs {
    /// Directory (or file) of request specs
    #[arg(long, env = "SPINDLE_SPECS")]
    pub(crate) specs: Option<PathBuf>,
    /// Database: sqlite://PATH, postgres://USER@HOST:PORT/DATABASE or
    /// mysql://USER:PASSWORD@HOST:PORT/DATABASE (MySQL 8.0+ or MariaDB 10.6+)
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
    /// Refuse creates (HTTP 503 with Retry-After) while this many requests wait to be
    /// handed to a Job Runner (PENDING); 0: never (default 10000)
    #[arg(long, env = "SPINDLE_MAX_BACKLOG")]
    pub(crate) max_backlog: Option<u64>,
    /// Reload the specs when their files change (they are read every second); they are
    /// always reloaded on SIGHUP, linted first, the old ones kept when the new have errors
    #[arg(long, env = "SPINDLE_WATCH_SPECS", num_args = 0..=1, default_missing_value = "true")]
    pub(crate) watch_specs: Option<bool>,
}

/// Flags of the services that hold a Job Runner, under their own heading in `--help`,
/// and their keys in the file.
#[derive(Debug, Default, Clone, clap::Args, serde::Deserialize, serde::Serialize)]
#[command(next_help_heading = "Job Runner")]
#[serde(default)]
pub(crate) struct RunnerArgs {
    /// The URL this Job Runner registers, as Request Managers reach it (default: its
    /// listen address, or this host's name when listening on 0.0.0.0 or ::)
    #[arg(long, env = "SPINDLE_ADVERTISE_URL")]
    pub(crate) advertise_url: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) shutdown: ShutdownArgs,
}

/// How long a service has at shutdown.
#[derive(Debug, Default, Clone, clap::Args, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub(crate) struct ShutdownArgs {
    /// How long a service has at shutdown (Go duration; default 20s): a Job Runner to
    /// hand its running chains back, a Request Manager to finish the HTTP requests in
    /// flight
    #[arg(long, env = "SPINDLE_SHUTDOWN_TIMEOUT")]
    pub(crate) shutdown_timeout: Option<String>,
}

/// Where a Request Manager alone sends chains.
#[derive(Debug, Default, Clone, clap::Args, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub(crate) struct SendsArgs {
    /// Where to send chains: a Job Runner or a load balancer before several (default:
    /// the live registered Job Runner with the fewest running requests)
    #[arg(long, env = "SPINDLE_JR_URL")]
    pub(crate) jr_url: Option<String>,
}

/// Where a Job Runner alone reports.
#[derive(Debug, Default, Clone, clap::Args, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub(crate) struct ReportsArgs {
    /// The Request Managers to register and report with: one URL, or several separated by
    /// commas (whichever answers is used)
    #[arg(long, env = "SPINDLE_RM_URL")]
    pub(crate) rm_url: Option<String>,
}

/// `spindle server`: a Request Manager and a Job Runner in one process.
#[derive(Debug, Clone, clap::Args, serde::Serialize)]
pub(crate) struct ServerArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) common: CommonArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) manager: ManagerArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) runner: RunnerArgs,
}

/// `spindle rm`: the Request Manager alone.
#[derive(Debug, Clone, clap::Args, serde::Serialize)]
pub(crate) struct RmArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) common: CommonArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) manager: ManagerArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) sends: SendsArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) shutdown: ShutdownArgs,
}

/// `spindle jr`: a Job Runner alone.
#[derive(Debug, Clone, clap::Args, serde::Serialize)]
pub(crate) struct JrArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) common: CommonArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) reports: ReportsArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) runner: RunnerArgs,
}

/// Validated settings.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) listen: SocketAddr,
    pub(crate) specs: PathBuf,
    pub(crate) database: String,
    /// None: the live registered Job Runner with the fewest running requests.
    pub(crate) jr_url: Option<String>,
    /// `runners:`: Job Runners by URL beside the registered ones.
    pub(crate) fixed_runners: Vec<rm::FixedRunner>,
    /// One or more Request Managers.
    pub(crate) rm_urls: Vec<String>,
    /// None: the listen address (see [`Settings::runner_url`]).
    pub(crate) advertise_url: Option<String>,
    pub(crate) shutdown_timeout: Duration,
    pub(crate) interval: Duration,
    pub(crate) suspended_ttl: Duration,
    /// None: finished requests are kept.
    pub(crate) retention: Option<Duration>,
    /// None: creates are never refused for a backlog.
    pub(crate) max_backlog: Option<u64>,
    pub(crate) lease: Duration,
    pub(crate) metrics: bool,
    pub(crate) otlp_endpoint: Option<String>,
    /// None: `RUST_LOG`, else info.
    pub(crate) log_level: Option<String>,
    pub(crate) log_format: LogFormat,
    /// Whether the specs are reloaded when their files change.
    pub(crate) watch_specs: bool,
    /// None: no authentication.
    pub(crate) auth: Option<AuthConfig>,
    /// What this service presents and trusts when it calls another.
    pub(crate) credentials: crate::client::credentials::Credentials,
    /// None: plain HTTP.
    pub(crate) tls: Option<super::http_server::ServerTls>,
    pub(crate) limits: super::http_server::Limits,
    /// Job programs whose types are added to the binary's own.
    pub(crate) jobs: Vec<job::external::ProgramConfig>,
    pub(crate) triggers: Vec<rm::triggers::TriggerConfig>,
    pub(crate) notify: rm::notify::NotifyConfig,
    pub(crate) secrets: rm::secrets::SecretsConfig,
}

impl Settings {
    /// `http` or `https`.
    pub(crate) fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// The URL a Job Runner listening on `address` registers: `advertise_url`, else the
    /// address, with this host's name in place of an unspecified IP (0.0.0.0 or ::),
    /// which no other machine can call.
    pub(crate) fn runner_url(&self, address: SocketAddr) -> String {
        match &self.advertise_url {
            Some(url) => url.clone(),
            None if address.ip().is_unspecified() => format!(
                "{}://{}:{}",
                self.scheme(),
                gethostname::gethostname().to_string_lossy(),
                address.port()
            ),
            None => format!("{}://{address}", self.scheme()),
        }
    }
}

/// Requests created and not yet handed to a Job Runner past which creates are refused,
/// when the configuration does not say: about five seconds of a flood at the knee.
pub(crate) const DEFAULT_MAX_BACKLOG: u64 = 10_000;

pub(super) fn duration(name: &str, text: &str) -> anyhow::Result<Duration> {
    proto::duration::parse(text)
        .with_context(|| format!("{name}: {text:?} is not a duration; expected such as 30s or 1m"))
}

impl FileConfig {
    /// The config file at `path`: YAML with only known keys (an unknown one is an error
    /// naming it and where it is).
    pub(crate) fn read(path: &std::path::Path) -> anyhow::Result<FileConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let failed =
            |err: &dyn std::fmt::Display| anyhow::anyhow!("config file {}: {err}", path.display());
        // Flattened groups of keys take what they do not know: the keys are checked
        // against the ones the file may have first.
        if let Ok(serde_json::Value::Object(given)) =
            serde_saphyr::from_str::<serde_json::Value>(&text)
        {
            let keys = FileConfig::keys();
            if let Some(unknown) = given.keys().find(|key| !keys.contains(key)) {
                let mut expected = keys;
                expected.sort();
                return Err(failed(&format!(
                    "unknown key `{unknown}`; expected one of: {}",
                    expected.join(", ")
                )));
            }
        }
        serde_saphyr::from_str::<FileConfig>(&text).map_err(|err| failed(&err))
    }

    /// A command's arguments (`flags`, serialized in the file's keys, `None` where not
    /// given) laid over this configuration: the one merge, key by key at any depth.
    pub(crate) fn under(self, flags: &impl serde::Serialize) -> anyhow::Result<FileConfig> {
        fn lay(over: serde_json::Value, under: serde_json::Value) -> serde_json::Value {
            match (over, under) {
                (serde_json::Value::Object(over), serde_json::Value::Object(mut under)) => {
                    for (key, value) in over {
                        let below = under.remove(&key).unwrap_or_default();
                        under.insert(key, lay(value, below));
                    }
                    serde_json::Value::Object(under)
                }
                (serde_json::Value::Null, under) => under,
                (over, _) => over,
            }
        }
        let merged = lay(serde_json::to_value(flags)?, serde_json::to_value(self)?);
        Ok(serde_json::from_value(merged)?)
    }

    /// The settings, every value checked, with the defaults for what is not given.
    pub(crate) fn settings(&self, default_listen: &str) -> anyhow::Result<Settings> {
        let file = self.clone();
        let pick = |given: &Option<String>, default: &str| {
            given.clone().unwrap_or_else(|| default.to_owned())
        };
        let listen = pick(&file.common.listen, default_listen);
        let listen: SocketAddr = listen.parse().with_context(|| {
            format!(
                "listen: {listen:?} is not an address; expected IP:PORT such as 127.0.0.1:32308"
            )
        })?;
        let database = pick(&file.manager.database, "sqlite://spindle.db");
        store::DatabaseUrl::parse(&database).context("database")?;
        let url = |name: &str, value: String| -> anyhow::Result<String> {
            if !(value.starts_with("http://") || value.starts_with("https://")) {
                anyhow::bail!("{name}: {value:?} is not a URL; expected http://HOST:PORT");
            }
            Ok(value)
        };
        Ok(Settings {
            listen,
            specs: file
                .manager
                .specs
                .clone()
                .unwrap_or_else(|| PathBuf::from("specs")),
            database,
            jr_url: file
                .sends
                .jr_url
                .clone()
                .map(|value| url("jr_url", value))
                .transpose()?,
            fixed_runners: fixed_runners(&file, &url)?,
            advertise_url: file
                .runner
                .advertise_url
                .clone()
                .map(|value| advertised(url("advertise_url", value)?))
                .transpose()?,
            rm_urls: pick(&file.reports.rm_url, "http://127.0.0.1:32308")
                .split(',')
                .map(|value| url("rm_url", value.trim().to_owned()))
                .collect::<anyhow::Result<_>>()?,
            shutdown_timeout: duration(
                "shutdown_timeout",
                &pick(&file.runner.shutdown.shutdown_timeout, "20s"),
            )?,
            interval: duration("interval", &pick(&file.manager.interval, "10s"))?,
            suspended_ttl: duration("suspended_ttl", &pick(&file.manager.suspended_ttl, "1h"))?,
            retention: match file.manager.retention.clone() {
                Some(text) => Some(positive("retention", duration("retention", &text)?)?),
                None => None,
            },
            max_backlog: match file.manager.max_backlog.unwrap_or(DEFAULT_MAX_BACKLOG) {
                0 => None,
                n => Some(n),
            },
            lease: positive(
                "lease",
                duration("lease", &pick(&file.common.lease, "10s"))?,
            )?,
            metrics: file.common.metrics.unwrap_or(true),
            otlp_endpoint: file
                .common
                .otlp_endpoint
                .clone()
                .or_else(|| std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok())
                .filter(|value| !value.is_empty())
                .map(|value| url("otlp_endpoint", value))
                .transpose()?,
            log_level: file
                .common
                .log_level
                .clone()
                .map(|value| log_filter(&value).map(|_| value))
                .transpose()?,
            log_format: file.common.log_format.unwrap_or_default(),
            watch_specs: file.manager.watch_specs.unwrap_or(false),
            tls: tls(file.common.tls.clone())?,
            limits: limits(file.limits.clone().unwrap_or_default())?,
            jobs: file.jobs.clone().unwrap_or_default(),
            triggers: file.triggers.clone().unwrap_or_default(),
            notify: file.notify.clone().unwrap_or_default(),
            secrets: file.secrets.clone().unwrap_or_default(),
            auth: file.auth,
            credentials: crate::client::credentials::Credentials {
                token: file.common.token.clone().filter(|t| !t.is_empty()),
                ca: file.client.as_ref().and_then(|c| c.ca.clone()),
                client_cert: file.client.as_ref().and_then(|c| c.cert.clone()),
                client_key: file.client.as_ref().and_then(|c| c.key.clone()),
            },
        })
    }
}

/// An `advertise_url` other machines can call: not an unspecified address.
fn advertised(url: String) -> anyhow::Result<String> {
    let parsed = url::Url::parse(&url).with_context(|| {
        format!("advertise_url: {url:?} is not a URL; expected http://HOST:PORT")
    })?;
    let unspecified = match parsed.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_unspecified(),
        Some(url::Host::Ipv6(ip)) => ip.is_unspecified(),
        Some(url::Host::Domain(_)) => false,
        None => anyhow::bail!("advertise_url: {url:?} names no host; expected http://HOST:PORT"),
    };
    if unspecified {
        anyhow::bail!(
            "advertise_url: {url:?} is an address to listen on, which no other machine can call; expected this machine's name or address, such as http://jr-1.example.com:32307"
        );
    }
    Ok(url)
}

/// HTTPS: the certificate and key (both or neither), and the CA of clients' certificates.
fn tls(given: TlsConfig) -> anyhow::Result<Option<super::http_server::ServerTls>> {
    let TlsConfig {
        cert,
        key,
        client_ca,
    } = given;
    Ok(match (cert, key) {
        (Some(cert), Some(key)) => Some(super::http_server::ServerTls {
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

/// How long a claim on a suspended chain may go unrenewed: a Request Manager that died
/// while resuming a chain (a lost runner's, say) leaves its claim, and the chain waits
/// this long for another to take it.
pub(crate) fn stale_claim(lease: Duration, interval: Duration) -> Duration {
    (lease * 2 + interval).max(Duration::from_secs(10))
}

/// The `limits:` section, checked, over the defaults.
fn limits(given: LimitsConfig) -> anyhow::Result<super::http_server::Limits> {
    let default = super::http_server::Limits::default();
    let timeout = |name: &str, given: &Option<String>, default: Duration| match given {
        Some(text) => positive(name, duration(name, text)?),
        None => Ok(default),
    };
    Ok(super::http_server::Limits {
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

/// What tells a Request Manager from the others on its database (its claims name it):
/// the machine's name and what is unique to the process there (a server's port, as
/// several servers on one machine may share a database; `spindle-run`).
pub(crate) fn manager_host(unique: impl std::fmt::Display) -> String {
    format!("{}:{unique}", gethostname::gethostname().to_string_lossy())
}

/// What a runner in this process registers with beside its URL.
pub(crate) fn lease_settings(lease: Duration) -> jr::LeaseSettings {
    jr::LeaseSettings {
        lease,
        host: gethostname::gethostname().to_string_lossy().into_owned(),
        pid: std::process::id(),
    }
}

/// The config's `runners:`, checked: each a URL, once, with job types if it lists any;
/// not with `jr_url`, which sends every chain to one place.
fn fixed_runners(
    file: &FileConfig,
    url: &dyn Fn(&str, String) -> anyhow::Result<String>,
) -> anyhow::Result<Vec<rm::FixedRunner>> {
    let Some(runners) = &file.runners else {
        return Ok(Vec::new());
    };
    if file.sends.jr_url.is_some() && !runners.is_empty() {
        anyhow::bail!(
            "runners: and jr_url both say where chains go; expected one (jr_url sends every chain to one Job Runner or load balancer; runners: lists Job Runners beside the registered ones)"
        );
    }
    let mut fixed: Vec<rm::FixedRunner> = Vec::new();
    for (index, runner) in runners.iter().enumerate() {
        let at = format!("runners[{index}]");
        let address = url(
            &format!("{at}.url"),
            runner.url.trim_end_matches('/').to_owned(),
        )?;
        if fixed.iter().any(|f| f.url == address) {
            anyhow::bail!("{at}.url: {address} is listed twice; expected each Job Runner once");
        }
        let types = match &runner.types {
            None => None,
            Some(types) if types.is_empty() => anyhow::bail!(
                "{at}.types: empty; expected the job types the runner has (noop among them), or no `types:` for a runner that refuses chains it cannot run"
            ),
            Some(types) => Some(types.iter().cloned().collect()),
        };
        fixed.push(rm::FixedRunner {
            url: address,
            types,
        });
    }
    Ok(fixed)
}

/// The service's settings: its arguments (`args`, which name the config file in
/// `config`) over the config file, read and checked, with logging set up by them. A bad
/// setting is reported before anything starts.
pub(super) fn settings_and_logs(
    args: &impl serde::Serialize,
    config: Option<&std::path::Path>,
    default_listen: &str,
) -> anyhow::Result<Settings> {
    let settings = config
        .map_or_else(|| Ok(FileConfig::default()), FileConfig::read)
        .and_then(|file| file.under(args))
        .and_then(|config| config.settings(default_listen));
    let (format, level) = match &settings {
        Ok(settings) => (settings.log_format, settings.log_level.as_deref()),
        Err(_) => (LogFormat::default(), None),
    };
    init_logging(format, level);
    settings
}
