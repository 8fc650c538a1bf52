//! What a client presents and trusts: a bearer token, a CA bundle to trust instead of
//! the system's roots, and a client certificate and key (mutual TLS). The CLI takes
//! them from flags, the environment or `~/.spindle.yaml`; the services from their
//! settings, for the calls they make to each other.

use std::path::PathBuf;

use anyhow::Context as _;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};

#[derive(Debug, Clone, Default)]
pub(crate) struct Credentials {
    pub(crate) token: Option<String>,
    /// PEM certificates to trust (instead of the system's roots).
    pub(crate) ca: Option<PathBuf>,
    /// PEM client certificate (chain) and its key, presented when a server asks.
    pub(crate) client_cert: Option<PathBuf>,
    pub(crate) client_key: Option<PathBuf>,
}

impl Credentials {
    /// The builder with these credentials; a file that cannot be read or parsed is an
    /// error naming it.
    pub(crate) fn apply(
        &self,
        mut builder: reqwest::ClientBuilder,
    ) -> anyhow::Result<reqwest::ClientBuilder> {
        if let Some(token) = &self.token {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
                .context("token: not a value an HTTP header can carry")?;
            value.set_sensitive(true);
            let mut headers = HeaderMap::new();
            headers.insert(AUTHORIZATION, value);
            builder = builder.default_headers(headers);
        }
        if let Some(ca) = &self.ca {
            let pem = std::fs::read(ca)
                .with_context(|| format!("cannot read the CA bundle {}", ca.display()))?;
            let certificates = reqwest::Certificate::from_pem_bundle(&pem).with_context(|| {
                format!("the CA bundle {} is not PEM certificates", ca.display())
            })?;
            if certificates.is_empty() {
                anyhow::bail!("the CA bundle {} holds no certificate", ca.display());
            }
            builder = builder.tls_certs_only(certificates);
        }
        match (&self.client_cert, &self.client_key) {
            (Some(cert), Some(key)) => {
                let mut pem = std::fs::read(cert).with_context(|| {
                    format!("cannot read the client certificate {}", cert.display())
                })?;
                pem.push(b'\n');
                pem.extend(
                    std::fs::read(key)
                        .with_context(|| format!("cannot read the client key {}", key.display()))?,
                );
                let identity = reqwest::Identity::from_pem(&pem).with_context(|| {
                    format!(
                        "the client certificate {} and key {} are not a PEM certificate and its key",
                        cert.display(),
                        key.display()
                    )
                })?;
                builder = builder.identity(identity);
            }
            (None, None) => {}
            _ => anyhow::bail!(
                "a client certificate needs its key, and a key its certificate: give both client_cert and client_key"
            ),
        }
        Ok(builder)
    }
}
