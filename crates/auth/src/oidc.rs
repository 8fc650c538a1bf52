//! OpenID Connect (issue #33): people sign in to the web UI with the company's identity
//! provider (the authorization code flow with PKCE, its state and nonce checked), and
//! the API takes the provider's ID or access tokens (JWTs) as bearer tokens, validated
//! against the provider's published keys (JWKS: signature, issuer, audience, expiry),
//! the keys read again when a token names one not seen (the provider rotated them). The
//! groups claim becomes the caller's roles, for the ACLs. The `jsonwebtoken` crate does
//! the cryptography; nothing here is hand-written crypto but PKCE's SHA-256 (`sha2`).

use std::sync::RwLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{DecodingKey, Validation};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Digest as _;

pub use crate::secret::SecretSource;
use crate::{Authenticator, Caller, Denied, Peer, Via};

/// The longest a sign-in may take between leaving for the provider and coming back.
pub const SIGN_IN_TTL: Duration = Duration::from_secs(600);
/// The keys are read again at most this often when tokens name unknown keys (so that
/// tokens naming made-up keys cannot make the provider be asked at every request).
const REFRESH_AT_MOST_EVERY: Duration = Duration::from_secs(1);
/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 30;

/// `auth.oidc` in the config.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcConfig {
    /// The provider's issuer URL; its discovery document is at
    /// `ISSUER/.well-known/openid-configuration`.
    pub issuer: String,
    pub client_id: String,
    /// The client secret, read at start from a file or an environment variable (a
    /// public client, PKCE only, has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<SecretSource>,
    /// The claim that holds the groups that become roles (default `groups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_claim: Option<String>,
    /// The claim that names the user (default `preferred_username`, then `email`, then
    /// `sub`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_claim: Option<String>,
    /// Scopes asked for at sign-in besides `openid` (default `profile email groups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// Audiences a bearer token may name besides the client id (an API's identifier,
    /// for access tokens).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audiences: Vec<String>,
    /// Where the provider sends people back: `https://HOST/ui/oidc/callback`, as
    /// registered with the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_url: Option<String>,
}

/// What the provider's discovery document says.
#[derive(Debug, Clone, Deserialize)]
struct Metadata {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
}

/// What a sign-in on its way to the provider and back keeps until its callback: kept by
/// the caller (the store, so that any Request Manager finishes what one began), as
/// [`SignIn::kept`]'s JSON.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Pending {
    nonce: String,
    verifier: String,
    next: String,
}

/// The provider's keys as last read.
struct Keys {
    set: JwkSet,
}

/// An OpenID Connect provider: discovered, its keys cached.
pub struct Oidc {
    config: OidcConfig,
    client_secret: Option<String>,
    audiences: Vec<String>,
    http: reqwest::Client,
    metadata: RwLock<Option<Metadata>>,
    keys: RwLock<Keys>,
    /// When the provider was last asked for keys because of an unknown one (one asks
    /// at a time).
    refreshing: tokio::sync::Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("issuer", &self.config.issuer)
            .field("client_id", &self.config.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "****"),
            )
            .finish_non_exhaustive()
    }
}

/// Where a sign-in goes: the provider's authorization URL, the state that names the
/// sign-in (also kept in a cookie, binding the sign-in to the browser that began it),
/// and what the caller keeps under that state until the callback ([`Oidc::finish`]),
/// at most [`SIGN_IN_TTL`] and taken once.
#[derive(Clone)]
pub struct SignIn {
    pub url: String,
    pub state: String,
    pub kept: String,
}

impl std::fmt::Debug for SignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIn")
            .field("url", &self.url)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// A finished sign-in: the ID token (the web UI's session), when it expires, who, and
/// where to go.
#[derive(Debug, Clone)]
pub struct SignedIn {
    pub id_token: String,
    pub expires_in: Duration,
    pub caller: Caller,
    pub next: String,
}

fn random_text(bytes: usize) -> String {
    use rand::RngExt as _;
    let mut buf = vec![0u8; bytes];
    rand::rng().fill(&mut buf[..]);
    URL_SAFE_NO_PAD.encode(buf)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Why OpenID Connect cannot be used: a setting, its secret, or the provider.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// A setting of `auth.oidc` is wrong, and what was expected.
    #[error("auth.oidc.{setting}: {problem}")]
    Setting {
        setting: &'static str,
        problem: String,
    },
    #[error(transparent)]
    Secret(#[from] crate::SecretError),
    /// The provider could not be read at `url`, or answered what was not expected.
    #[error("reading {url}: {problem}")]
    Provider {
        url: String,
        problem: String,
        #[source]
        source: Option<reqwest::Error>,
    },
    /// Its discovery document has not been read yet.
    #[error("the identity provider has not been reached yet; try again shortly")]
    NotReached,
}

impl OidcError {
    fn setting(setting: &'static str, problem: impl Into<String>) -> OidcError {
        OidcError::Setting {
            setting,
            problem: problem.into(),
        }
    }
}

impl Oidc {
    /// Checks `config` and reads its secret; the provider is asked by [`Oidc::discover`].
    pub fn new(config: &OidcConfig, http: reqwest::Client) -> Result<Oidc, OidcError> {
        let issuer = url::Url::parse(&config.issuer)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https"))
            .ok_or_else(|| {
                OidcError::setting(
                    "issuer",
                    format!(
                        "{:?} is not an http(s) URL; expected the provider's issuer, such as https://login.example.com",
                        config.issuer
                    ),
                )
            })?;
        let _ = issuer;
        if config.client_id.is_empty() {
            return Err(OidcError::setting(
                "client_id",
                "expected the client id registered with the provider",
            ));
        }
        if let Some(redirect) = &config.redirect_url
            && url::Url::parse(redirect).is_err()
        {
            return Err(OidcError::setting(
                "redirect_url",
                format!("{redirect:?} is not a URL; expected https://HOST/ui/oidc/callback"),
            ));
        }
        let client_secret = config
            .client_secret
            .as_ref()
            .map(|from| from.read("auth.oidc.client_secret"))
            .transpose()?;
        let mut audiences = vec![config.client_id.clone()];
        audiences.extend(config.audiences.iter().cloned());
        Ok(Oidc {
            config: config.clone(),
            client_secret,
            audiences,
            http,
            metadata: RwLock::new(None),
            keys: RwLock::new(Keys {
                set: JwkSet { keys: Vec::new() },
            }),
            refreshing: tokio::sync::Mutex::new(None),
        })
    }

    /// Reads the provider's discovery document and keys: an error says what was wrong.
    pub async fn discover(&self) -> Result<(), OidcError> {
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.config.issuer.trim_end_matches('/')
        );
        let metadata: Metadata = self.get_json(&url).await?;
        if metadata.issuer.trim_end_matches('/') != self.config.issuer.trim_end_matches('/') {
            return Err(OidcError::setting(
                "issuer",
                format!(
                    "the provider at {url} says its issuer is {:?}; expected {:?}",
                    metadata.issuer, self.config.issuer
                ),
            ));
        }
        *self.metadata.write().unwrap_or_else(|p| p.into_inner()) = Some(metadata);
        self.refresh_keys().await
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, OidcError> {
        let failed = |problem: String, source: Option<reqwest::Error>| OidcError::Provider {
            url: url.to_owned(),
            problem,
            source,
        };
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|err| failed("cannot reach the provider".to_owned(), Some(err)))?;
        if !response.status().is_success() {
            return Err(failed(
                format!("the provider answered {}", response.status()),
                None,
            ));
        }
        response
            .json()
            .await
            .map_err(|err| failed("not the JSON expected".to_owned(), Some(err)))
    }

    fn metadata(&self) -> Option<Metadata> {
        self.metadata
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    async fn refresh_keys(&self) -> Result<(), OidcError> {
        let Some(metadata) = self.metadata() else {
            return Err(OidcError::NotReached);
        };
        let set: JwkSet = self.get_json(&metadata.jwks_uri).await?;
        let mut keys = self.keys.write().unwrap_or_else(|p| p.into_inner());
        *keys = Keys { set };
        Ok(())
    }

    /// Before a token is validated: when it names a key not among those read (the
    /// provider rotated its keys), or discovery has not succeeded yet, the provider is
    /// asked again (at most every second).
    pub async fn prepare(&self, token: &str) {
        let Some(kid) = key_id(token) else {
            return;
        };
        let known = {
            let keys = self.keys.read().unwrap_or_else(|p| p.into_inner());
            keys.set.find(&kid).is_some()
        };
        if known {
            return;
        }
        let mut tried = self.refreshing.lock().await;
        let known = {
            let keys = self.keys.read().unwrap_or_else(|p| p.into_inner());
            keys.set.find(&kid).is_some()
        };
        if known || tried.is_some_and(|at: Instant| at.elapsed() < REFRESH_AT_MOST_EVERY) {
            return;
        }
        *tried = Some(Instant::now());
        let refreshed = if self.metadata().is_none() {
            self.discover().await
        } else {
            self.refresh_keys().await
        };
        if let Err(err) = refreshed {
            tracing::warn!(
                error = &err as &dyn std::error::Error,
                "reading the identity provider's keys failed"
            );
        }
    }

    /// The caller a JWT names, if it is valid: signed by one of the provider's keys,
    /// issued by it, for this client (or a configured audience), not expired; with
    /// `nonce`, the ID token of the sign-in that sent it.
    // Long because a token is checked in the order RFC 7519 and OpenID Connect Core give,
    // each check with its own refusal that says what was expected: alg (none refused),
    // the key by kid (read again once for a new one), signature, issuer, audience,
    // expiry and not-before, nonce, then the user and groups claims.
    pub fn validate(&self, token: &str, nonce: Option<&str>) -> Result<(Caller, u64), Denied> {
        let denied = |why: String| {
            Denied::Unauthenticated(format!("the OpenID Connect token is not valid: {why}"))
        };
        let alg = header_alg(token).map_err(&denied)?;
        if alg.eq_ignore_ascii_case("none") {
            return Err(denied(
                "it is not signed (alg none); expected a token signed by the provider".to_owned(),
            ));
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|err| denied(format!("its header cannot be read ({err})")))?;
        let key = {
            let keys = self.keys.read().unwrap_or_else(|p| p.into_inner());
            let jwk = match &header.kid {
                Some(kid) => keys.set.find(kid),
                None if keys.set.keys.len() == 1 => keys.set.keys.first(),
                None => None,
            }
            .ok_or_else(|| {
                denied(format!(
                    "it is signed by key {:?}, which the provider does not publish (another key, or another issuer)",
                    header.kid.as_deref().unwrap_or("(none named)")
                ))
            })?;
            DecodingKey::from_jwk(jwk)
                .map_err(|err| denied(format!("the provider's key cannot be used ({err})")))?
        };
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[
            self.config.issuer.as_str(),
            self.config.issuer.trim_end_matches('/'),
        ]);
        validation.set_audience(&self.audiences);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<Value>(token, &key, &validation).map_err(|err| {
            use jsonwebtoken::errors::ErrorKind;
            denied(match err.kind() {
                ErrorKind::ExpiredSignature => "it has expired; sign in again".to_owned(),
                ErrorKind::InvalidAudience => format!(
                    "it is for another audience; expected one of: {}",
                    self.audiences.join(", ")
                ),
                ErrorKind::InvalidIssuer => format!(
                    "it was issued by another issuer; expected {}",
                    self.config.issuer
                ),
                ErrorKind::InvalidSignature => {
                    "its signature does not match the provider's key".to_owned()
                }
                ErrorKind::ImmatureSignature => "it is not valid yet (nbf)".to_owned(),
                ErrorKind::MissingRequiredClaim(claim) => format!("it has no {claim} claim"),
                _ => err.to_string(),
            })
        })?;
        let claims = data.claims;
        if let Some(nonce) = nonce
            && claims.get("nonce").and_then(Value::as_str) != Some(nonce)
        {
            return Err(denied(
                "its nonce is not the sign-in's (a token of another sign-in)".to_owned(),
            ));
        }
        let user = match &self.config.user_claim {
            Some(claim) => claims.get(claim).and_then(Value::as_str),
            None => ["preferred_username", "email", "sub"]
                .iter()
                .find_map(|claim| claims.get(*claim).and_then(Value::as_str)),
        }
        .filter(|user| !user.is_empty())
        .ok_or_else(|| {
            denied(format!(
                "it has no {} claim to name the user",
                self.config
                    .user_claim
                    .as_deref()
                    .unwrap_or("preferred_username, email or sub")
            ))
        })?;
        let groups_claim = self.config.groups_claim.as_deref().unwrap_or("groups");
        let roles = match claims.get(groups_claim) {
            Some(Value::Array(groups)) => groups
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(Value::String(group)) => group
                .split([',', ' '])
                .filter(|g| !g.is_empty())
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        };
        let exp = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        Ok((
            Caller {
                name: user.to_owned(),
                roles,
                via: Via::Oidc,
            },
            exp,
        ))
    }

    /// Begins a sign-in that returns to `next` (a path of this server): the provider's
    /// URL to send the browser to, with a new state, nonce and PKCE challenge.
    pub fn begin(&self, next: &str) -> Result<SignIn, OidcError> {
        let metadata = self.metadata().ok_or(OidcError::NotReached)?;
        let redirect = self.config.redirect_url.as_deref().ok_or_else(|| {
            OidcError::setting(
                "redirect_url",
                "not set; expected https://HOST/ui/oidc/callback, as registered with the provider",
            )
        })?;
        let state = random_text(24);
        let nonce = random_text(24);
        let verifier = random_text(48);
        let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
        let mut scopes = vec!["openid".to_owned()];
        scopes.extend(
            self.config
                .scopes
                .clone()
                .unwrap_or_else(|| vec!["profile".into(), "email".into(), "groups".into()])
                .into_iter()
                .filter(|s| s != "openid"),
        );
        let mut url = url::Url::parse(&metadata.authorization_endpoint).map_err(|err| {
            OidcError::Provider {
                url: metadata.authorization_endpoint.clone(),
                problem: format!("the provider's authorization_endpoint is not a URL: {err}"),
                source: None,
            }
        })?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", redirect)
            .append_pair("scope", &scopes.join(" "))
            .append_pair("state", &state)
            .append_pair("nonce", &nonce)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        let next = if next.starts_with('/') && !next.starts_with("//") {
            next.to_owned()
        } else {
            "/".to_owned()
        };
        let kept = serde_json::to_string(&Pending {
            nonce,
            verifier,
            next,
        })
        .unwrap_or_default();
        Ok(SignIn {
            url: url.to_string(),
            state,
            kept,
        })
    }

    /// Whether the callback's `state` is the one the browser's sign-in began with
    /// (`browser_state`, from its cookie): asked before the sign-in is taken, so that
    /// another browser's callback does not use it up.
    pub fn same_browser(state: &str, browser_state: Option<&str>) -> Result<(), Denied> {
        if browser_state == Some(state) {
            return Ok(());
        }
        Err(Denied::Unauthenticated(
            "sign-in refused: the state is not the one this browser's sign-in began with; sign in again"
                .to_owned(),
        ))
    }

    /// Finishes a sign-in with the provider's `code`: `kept` is what its [`SignIn::kept`]
    /// was, taken once by the caller under its state (none: unknown, expired or used);
    /// the code is exchanged (with the PKCE verifier) for an ID token, which must carry
    /// the sign-in's nonce.
    pub async fn finish(&self, code: &str, kept: Option<&str>) -> Result<SignedIn, Denied> {
        let denied =
            |why: &str| Denied::Unauthenticated(format!("sign-in refused: {why}; sign in again"));
        let pending: Pending = kept
            .and_then(|kept| serde_json::from_str(kept).ok())
            .ok_or_else(|| denied("the state is unknown, expired or was used already"))?;
        let metadata = self
            .metadata()
            .ok_or_else(|| denied("the identity provider has not been reached"))?;
        let redirect = self.config.redirect_url.clone().unwrap_or_default();
        let mut form = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code.to_owned()),
            ("redirect_uri", redirect),
            ("client_id", self.config.client_id.clone()),
            ("code_verifier", pending.verifier.clone()),
        ];
        if let Some(secret) = &self.client_secret {
            form.push(("client_secret", secret.clone()));
        }
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
            .finish();
        let response = self
            .http
            .post(&metadata.token_endpoint)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|err| {
                tracing::warn!(
                    error = &err as &dyn std::error::Error,
                    url = metadata.token_endpoint,
                    "sign-in: the provider's token endpoint cannot be reached"
                );
                Denied::Unauthenticated(format!(
                    "sign-in failed: the provider's token endpoint cannot be reached: {err}"
                ))
            })?;
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            return Err(Denied::Unauthenticated(format!(
                "sign-in failed: the provider refused the code ({status}: {})",
                answer
                    .get("error_description")
                    .or_else(|| answer.get("error"))
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given")
            )));
        }
        let id_token = answer
            .get("id_token")
            .and_then(Value::as_str)
            .ok_or_else(|| denied("the provider's answer has no id_token"))?
            .to_owned();
        let (caller, exp) = self.validate(&id_token, Some(&pending.nonce))?;
        Ok(SignedIn {
            id_token,
            expires_in: Duration::from_secs(exp.saturating_sub(now_secs())),
            caller,
            next: pending.next,
        })
    }
}

/// Whether `token` has a JWT's shape (three base64url parts).
fn is_jwt(token: &str) -> bool {
    token.split('.').count() == 3 && token.split('.').take(2).all(|part| !part.is_empty())
}

/// The `alg` a JWT's header names, read without trusting it.
fn header_alg(token: &str) -> Result<String, String> {
    let header = token.split('.').next().unwrap_or_default();
    let bytes = URL_SAFE_NO_PAD
        .decode(header.trim_end_matches('='))
        .map_err(|_| "its header is not base64url".to_owned())?;
    let header: Value =
        serde_json::from_slice(&bytes).map_err(|_| "its header is not JSON".to_owned())?;
    Ok(header
        .get("alg")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned())
}

/// The key id a JWT's header names.
fn key_id(token: &str) -> Option<String> {
    if !is_jwt(token) {
        return None;
    }
    jsonwebtoken::decode_header(token).ok()?.kid
}

impl Authenticator for Oidc {
    fn authenticate(&self, headers: &HeaderMap, _: &Peer) -> Result<Option<Caller>, Denied> {
        let Some(token) = crate::tokens::presented(headers)? else {
            return Ok(None);
        };
        if !is_jwt(&token) {
            return Ok(None);
        }
        self.validate(&token, None).map(|(caller, _)| Some(caller))
    }

    fn prepare<'a>(
        &'a self,
        headers: &'a HeaderMap,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            if let Ok(Some(token)) = crate::tokens::presented(headers) {
                self.prepare(&token).await;
            }
        })
    }

    fn oidc(&self) -> Option<&Oidc> {
        Some(self)
    }
}

#[cfg(test)]
#[path = "oidc_tests.rs"]
mod tests;
