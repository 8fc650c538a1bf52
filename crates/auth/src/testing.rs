//! An OpenID Connect identity provider of a test's own (discovery, JWKS, authorization
//! and token endpoints, on 127.0.0.1), for tests of this crate and of the services that
//! use it (the `testing` feature).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use sha2::Digest as _;

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A signing key of the provider's: its private key and its public JWK.
pub struct Key {
    pub kid: String,
    pub encoding: EncodingKey,
    pub jwk: Value,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("issuer", &self.issuer)
            .field("published", &self.published)
            .field("jwks_reads", &self.jwks_reads)
            .finish_non_exhaustive()
    }
}

/// A new ES256 key named `kid`.
pub fn key(kid: &str) -> Key {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let raw = pair.public_key_raw();
    Key {
        kid: kid.to_owned(),
        encoding: EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).unwrap(),
        jwk: json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(&raw[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&raw[33..65]),
        }),
    }
}

/// What the provider knows and does; the test changes it (rotating keys).
#[derive(Default)]
pub struct Provider {
    pub issuer: String,
    /// The keys it publishes now.
    pub published: Vec<Value>,
    /// The key it signs ID tokens with.
    pub signing: Option<(String, EncodingKey)>,
    /// Codes given: (challenge, nonce, redirect).
    pub codes: HashMap<String, (String, String, String)>,
    pub jwks_reads: usize,
}

pub type Shared = Arc<Mutex<Provider>>;

/// A JWT of `claims` signed by `key`.
pub fn sign(key: &Key, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&header, claims, &key.encoding).unwrap()
}

/// An identity provider on 127.0.0.1 publishing and signing with `first`: its issuer URL
/// and its state. Its client is `spindle` with secret `client-secret-1`; its ID tokens
/// name `ann`, groups `dba` and `oncall`.
pub async fn provider(first: &Key) -> (String, Shared) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let shared: Shared = Arc::new(Mutex::new(Provider {
        issuer: issuer.clone(),
        published: vec![first.jwk.clone()],
        signing: Some((first.kid.clone(), first.encoding.clone())),
        ..Provider::default()
    }));
    let app = axum::Router::new()
        .route(
            "/.well-known/openid-configuration",
            get(|State(p): State<Shared>| async move {
                let issuer = p.lock().unwrap().issuer.clone();
                axum::Json(json!({
                    "issuer": issuer,
                    "authorization_endpoint": format!("{issuer}/authorize"),
                    "token_endpoint": format!("{issuer}/token"),
                    "jwks_uri": format!("{issuer}/jwks"),
                }))
            }),
        )
        .route(
            "/jwks",
            get(|State(p): State<Shared>| async move {
                let mut p = p.lock().unwrap();
                p.jwks_reads += 1;
                axum::Json(json!({ "keys": p.published }))
            }),
        )
        .route(
            "/authorize",
            get(
                |State(p): State<Shared>, Query(q): Query<HashMap<String, String>>| async move {
                    assert_eq!(q["response_type"], "code");
                    assert_eq!(q["code_challenge_method"], "S256");
                    assert!(q["scope"].split(' ').any(|s| s == "openid"));
                    let code = format!("code-{}", q["state"]);
                    p.lock().unwrap().codes.insert(
                        code.clone(),
                        (q["code_challenge"].clone(), q["nonce"].clone(), q["redirect_uri"].clone()),
                    );
                    Redirect::to(&format!("{}?code={code}&state={}", q["redirect_uri"], q["state"]))
                },
            ),
        )
        .route(
            "/token",
            post(
                |State(p): State<Shared>, body: String| async move {
                    let form: HashMap<String, String> =
                        url::form_urlencoded::parse(body.as_bytes()).into_owned().collect();
                    let mut p = p.lock().unwrap();
                    let Some((challenge, nonce, redirect)) = p.codes.remove(&form["code"]) else {
                        return (axum::http::StatusCode::BAD_REQUEST, axum::Json(json!({"error": "invalid_grant", "error_description": "unknown code"}))).into_response();
                    };
                    let verified = URL_SAFE_NO_PAD
                        .encode(sha2::Sha256::digest(form["code_verifier"].as_bytes()));
                    if verified != challenge || form["redirect_uri"] != redirect {
                        return (axum::http::StatusCode::BAD_REQUEST, axum::Json(json!({"error": "invalid_grant", "error_description": "PKCE verification failed"}))).into_response();
                    }
                    assert_eq!(form["client_secret"], "client-secret-1");
                    let (kid, encoding) = p.signing.clone().unwrap();
                    let mut header = Header::new(Algorithm::ES256);
                    header.kid = Some(kid);
                    let claims = json!({
                        "iss": p.issuer, "aud": "spindle", "sub": "u-1",
                        "preferred_username": "ann", "groups": ["dba", "oncall"],
                        "nonce": nonce, "exp": now_secs() + 3600, "iat": now_secs(),
                    });
                    let id_token = jsonwebtoken::encode(&header, &claims, &encoding).unwrap();
                    axum::Json(json!({"id_token": id_token, "access_token": "opaque", "token_type": "Bearer"})).into_response()
                },
            ),
        )
        .with_state(shared.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (issuer, shared)
}

/// Claims of a token of `issuer` for client `spindle`: user `ann`, groups `dba` and
/// `oncall`, valid ten minutes.
pub fn claims(issuer: &str) -> Value {
    json!({
        "iss": issuer, "aud": "spindle", "sub": "u-1", "preferred_username": "ann",
        "groups": ["dba", "oncall"], "exp": now_secs() + 600, "iat": now_secs(),
    })
}
