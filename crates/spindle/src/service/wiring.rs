//! What the services are built from: telemetry, the listener and HTTP server, the
//! clients that call the other services, authentication.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::config::Settings;
use super::logging::LogFormat;
use super::specs::acls_of;

/// Metrics (unless off) and the trace exporter (when an endpoint is set) of a service.
pub(super) fn telemetry(
    settings: &Settings,
    service: &str,
) -> anyhow::Result<telemetry::Telemetry> {
    let metrics = settings
        .metrics
        .then(|| Arc::new(telemetry::Metrics::new()));
    let traces = match &settings.otlp_endpoint {
        None => None,
        Some(endpoint) => {
            // The collector is not a Spindle service: it gets no token, only the CA.
            let collector = Settings {
                credentials: crate::client::credentials::Credentials {
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
pub(super) async fn flush_traces(telemetry: &telemetry::Telemetry) {
    if let Some(traces) = telemetry.traces.clone() {
        let _ = tokio::task::spawn_blocking(move || traces.shutdown()).await;
    }
}

/// Binds the service's address before anything else starts, so that a port in use ends
/// the process at once (exit 2 with the reason), and says where it listens: the port
/// the system chose for `:0` too (tests start servers that way).
pub(super) async fn bind(
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

pub(super) fn serve(
    listener: TcpListener,
    router: axum::Router,
    stop: CancellationToken,
    settings: &Settings,
) -> impl Future<Output = anyhow::Result<()>> + Send + 'static {
    let tls = settings.tls.clone();
    let limits = settings.limits;
    async move {
        super::http_server::serve(listener, router, stop, tls, limits)
            .await
            .context("serving HTTP")
    }
}

/// The HTTP client a service reaches the other with: short connect timeout, a bound on
/// each call, HTTPS through the process's rustls provider, connections kept alive.
pub(super) fn service_http(settings: &Settings) -> anyhow::Result<reqwest::Client> {
    let builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(30));
    settings
        .credentials
        .apply(builder)?
        .build()
        .context("building the HTTP client")
}

/// Reads the OpenID Connect provider's discovery document and keys, if one is
/// configured. A provider that cannot be reached is logged and asked again when a token
/// comes (the other ways of authenticating work meanwhile).
pub(crate) async fn discover_provider(auth: Option<&Arc<auth::Auth>>) {
    let Some(oidc) = auth.and_then(|auth| auth.oidc()) else {
        return;
    };
    match oidc.discover().await {
        Ok(()) => tracing::info!("the OpenID Connect provider was reached; single sign-on is on"),
        Err(err) => {
            tracing::error!(
                error = &err as &dyn std::error::Error,
                "auth.oidc: the provider cannot be read; single sign-on fails until it can"
            )
        }
    }
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
    // Before the tokens: a JWT is the provider's, never one of Spindle's tokens.
    if let Some(oidc) = &config.oidc {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .build()
            .context("building the OpenID Connect client")?;
        let provider = auth::oidc::Oidc::new(oidc, http)?;
        authenticators.push(Arc::new(provider));
    }
    if let Some(path) = &config.tokens {
        let tokens = auth::Tokens::read(path).context("auth.tokens")?;
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
            "auth: no way to authenticate anyone; expected tokens, oidc, proxy or client_certificates"
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
        metrics_roles: config
            .metrics_roles
            .clone()
            .unwrap_or_else(|| vec!["metrics".to_owned()]),
    })))
}

/// The Job Runner's: only service callers, by the same authenticators (no ACLs).
pub(super) fn build_runner_auth(settings: &Settings) -> anyhow::Result<Option<Arc<auth::Auth>>> {
    build_auth(settings, &spec::Specs::default(), &[])
}

/// Says so when a service without authentication listens beyond this machine.
pub(super) fn warn_if_open(settings: &Settings, what: &str) {
    if settings.auth.is_none() && !settings.listen.ip().is_loopback() {
        tracing::warn!(
            listen = %settings.listen,
            "{what}: authentication is off (no auth: in the config file): anyone who can reach {} can start and stop any request",
            settings.listen
        );
    }
}

/// Authenticators a team's binary adds ([`main_with_authenticators`]).
static AUTHENTICATORS: std::sync::OnceLock<Vec<std::sync::Arc<dyn auth::Authenticator>>> =
    std::sync::OnceLock::new();

pub(crate) fn custom_authenticators() -> &'static [std::sync::Arc<dyn auth::Authenticator>] {
    AUTHENTICATORS.get().map_or(&[], Vec::as_slice)
}

/// Sets the authenticators of [`custom_authenticators`], once, before any service starts.
pub(crate) fn set_authenticators(authenticators: Vec<std::sync::Arc<dyn auth::Authenticator>>) {
    let _ = AUTHENTICATORS.set(authenticators);
}
