//! The services' HTTP server: hyper over the bound listener, plain or TLS (rustls), with
//! limits on what one client can send, and each connection's [`auth::Peer`] (its address
//! and the client certificate the handshake verified) in every request's extensions.
//!
//! TLS: `tls.cert` and `tls.key` (PEM) are read at start and again whenever either file
//! (or `tls.client_ca`) changes, checked every [`RELOAD_EVERY`]; a pair that does not
//! load is logged and the one in use kept. With `tls.client_ca`, every client must
//! present a certificate that CA issued (mutual TLS).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// How often the certificate files are checked for changes.
pub(crate) const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// A server's certificate and key, and the CA its clients' certificates must chain to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerTls {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    pub(crate) client_ca: Option<PathBuf>,
}

/// What one client may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// A request body's size (a big chain handed to a runner, a batch of job logs).
    pub(crate) body_bytes: usize,
    /// The request line and headers together.
    pub(crate) header_bytes: usize,
    /// From the connection (or the previous request) to the end of the headers.
    pub(crate) header_timeout: Duration,
    /// Reading the body.
    pub(crate) body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            body_bytes: 64 << 20,
            header_bytes: 64 << 10,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(60),
        }
    }
}

fn certificates(path: &Path, what: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("cannot read {what} {}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{what} {} is not PEM certificates", path.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{what} {} holds no certificate", path.display());
    }
    Ok(certs)
}

/// The rustls configuration of `tls`, every file read now.
pub(crate) fn server_config(tls: &ServerTls) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain = certificates(&tls.cert, "tls.cert")?;
    let key = PrivateKeyDer::from_pem_file(&tls.key)
        .with_context(|| format!("tls.key {} is not a PEM private key", tls.key.display()))?;
    let builder = rustls::ServerConfig::builder();
    let builder = match &tls.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in certificates(ca, "tls.client_ca")? {
                roots.add(cert).with_context(|| {
                    format!(
                        "tls.client_ca {}: a certificate is not usable",
                        ca.display()
                    )
                })?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
                .build()
                .context("tls.client_ca: cannot verify clients with it")?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .context("tls.cert and tls.key do not go together")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// What a verified client certificate says of its subject.
fn certificate_of(der: &CertificateDer<'_>) -> Option<auth::Certificate> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    let subject = cert.subject();
    let texts = |attrs: Vec<&x509_parser::x509::AttributeTypeAndValue<'_>>| -> Vec<String> {
        attrs
            .into_iter()
            .filter_map(|a| a.as_str().ok().map(str::to_owned))
            .collect()
    };
    let uris = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    x509_parser::extensions::GeneralName::URI(uri) => Some((*uri).to_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Some(auth::Certificate {
        common_names: texts(subject.iter_common_name().collect()),
        organizational_units: texts(subject.iter_organizational_unit().collect()),
        uris,
    })
}

/// Every error answer has Spindle's one error body: a refusal made below the handlers (a
/// body past the limit, a body too slow, a malformed path) comes as plain text from axum
/// and is given the JSON body with its text as the message.
async fn json_errors(response: axum::response::Response) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let status = response.status();
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, 64 << 10).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let mut fixed = (
        status,
        axum::Json(proto::Error::new(status.as_u16(), message)),
    )
        .into_response();
    for (name, value) in &parts.headers {
        if name != axum::http::header::CONTENT_TYPE && name != axum::http::header::CONTENT_LENGTH {
            fixed.headers_mut().insert(name.clone(), value.clone());
        }
    }
    fixed
}

fn modified(paths: &[&Path]) -> Vec<Option<SystemTime>> {
    paths
        .iter()
        .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
}

/// Reloads the server's certificate when its files change (read every
/// [`RELOAD_EVERY`]), until `stop`; files that do not load leave the one in use.
async fn reload_tls(
    tls: ServerTls,
    config: Arc<RwLock<Arc<rustls::ServerConfig>>>,
    stop: CancellationToken,
) {
    let files = |tls: &ServerTls| {
        let mut paths = vec![tls.cert.clone(), tls.key.clone()];
        paths.extend(tls.client_ca.clone());
        paths
    };
    let paths = files(&tls);
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let mut seen = modified(&refs);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(RELOAD_EVERY) => {}
        }
        let now = modified(&refs);
        if now == seen {
            continue;
        }
        seen = now;
        match server_config(&tls) {
            Ok(fresh) => {
                *config
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
                tracing::info!(cert = %tls.cert.display(), "TLS certificate reloaded");
            }
            Err(err) => tracing::warn!(
                error = format!("{err:#}"),
                "the changed TLS files do not load; keeping the certificate in use"
            ),
        }
    }
}

/// HTTP/1 and HTTP/2 connections with the limits' header size and time.
fn connection_builder(limits: &Limits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .max_buf_size(limits.header_bytes.max(8192))
        .header_read_timeout(limits.header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.header_bytes).unwrap_or(u32::MAX));
    builder
}

/// `router` with the body's size and time limits, and errors of its own as JSON.
fn limited(router: axum::Router, limits: &Limits) -> axum::Router {
    router
        .layer(axum::extract::DefaultBodyLimit::max(limits.body_bytes))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            limits.body_timeout,
        ))
        .layer(axum::middleware::map_response(json_errors))
}

/// Serves `router` on `listener` until `stop`, then lets the requests in flight finish.
// Long because it is the accept loop and each connection's task, plain or TLS (the
// handshake bounded by the header timeout, the client certificate read into the peer),
// all owned here until the last connection ends.
pub(crate) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    stop: CancellationToken,
    tls: Option<ServerTls>,
    limits: Limits,
) -> anyhow::Result<()> {
    let router = limited(router, &limits);
    let config = match &tls {
        Some(tls) => Some(Arc::new(RwLock::new(server_config(tls)?))),
        None => None,
    };
    // Every task of the server is owned here: the TLS reloads, and each connection's
    // (which the graceful shutdown also waits for).
    let tasks = tokio_util::task::TaskTracker::new();
    if let (Some(tls), Some(config)) = (tls.clone(), config.clone()) {
        tasks.spawn(reload_tls(tls, config, stop.clone()));
    }
    let builder = Arc::new(connection_builder(&limits));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (tcp, addr) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors, say: wait a little rather than spin.
                    tracing::warn!(error = %err, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let router = router.clone();
        let builder = builder.clone();
        let acceptor = config.as_ref().map(|config| {
            tokio_rustls::TlsAcceptor::from(
                config
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone(),
            )
        });
        let watcher = graceful.watcher();
        let header_timeout = limits.header_timeout;
        tasks.spawn(async move {
            let service = |peer: auth::Peer| {
                hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let mut request = request.map(axum::body::Body::new);
                    request.extensions_mut().insert(peer.clone());
                    request
                        .extensions_mut()
                        .insert(axum::extract::ConnectInfo(addr));
                    router.clone().oneshot(request)
                })
            };
            match acceptor {
                None => {
                    let peer = auth::Peer {
                        addr: Some(addr),
                        certificate: None,
                    };
                    let connection = builder
                        .serve_connection_with_upgrades(TokioIo::new(tcp), service(peer))
                        .into_owned();
                    let _ = watcher.watch(connection).await;
                }
                Some(acceptor) => {
                    let stream =
                        match tokio::time::timeout(header_timeout, acceptor.accept(tcp)).await {
                            Ok(Ok(stream)) => stream,
                            Ok(Err(err)) => {
                                tracing::debug!(peer = %addr, error = %err, "TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                tracing::debug!(peer = %addr, "TLS handshake timed out");
                                return;
                            }
                        };
                    let certificate = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|certs| certs.first())
                        .and_then(certificate_of);
                    let peer = auth::Peer {
                        addr: Some(addr),
                        certificate,
                    };
                    let connection = builder
                        .serve_connection_with_upgrades(TokioIo::new(stream), service(peer))
                        .into_owned();
                    let _ = watcher.watch(connection).await;
                }
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    tasks.close();
    tasks.wait().await;
    Ok(())
}
