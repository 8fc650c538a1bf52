//! OpenID Connect against an identity provider of the test's own (discovery, JWKS,
//! authorization and token endpoints, on 127.0.0.1): tokens it signs are taken; an
//! expired one, one for another audience or issuer, one signed by another key, an
//! unsigned one (`alg: none`) and a replayed sign-in are each refused with why.

use std::collections::HashMap;

use serde_json::json;

use super::*;
use crate::testing::{claims, key, provider, sign};

async fn oidc(issuer: &str, dir: &std::path::Path) -> Oidc {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let secret = dir.join("client.secret");
    std::fs::write(&secret, "client-secret-1\n").unwrap();
    let oidc = Oidc::new(
        &OidcConfig {
            issuer: issuer.to_owned(),
            client_id: "spindle".to_owned(),
            client_secret: Some(SecretSource {
                file: Some(secret),
                env: None,
            }),
            audiences: vec!["spindle-api".to_owned()],
            redirect_url: Some("https://spindle.example.com/ui/oidc/callback".to_owned()),
            ..OidcConfig::default()
        },
        reqwest::Client::new(),
    )
    .unwrap();
    oidc.discover().await.unwrap();
    oidc
}

fn bearer(token: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
    headers
}

fn refused(oidc: &Oidc, token: &str) -> String {
    match oidc.authenticate(&bearer(token), &Peer::default()) {
        Err(Denied::Unauthenticated(why)) => why,
        other => panic!("expected a 401, got {other:?}"),
    }
}

#[tokio::test]
async fn the_providers_tokens_are_taken_and_bad_ones_refused_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let k1 = key("k1");
    let (issuer, _provider) = provider(&k1).await;
    let oidc = oidc(&issuer, dir.path()).await;

    let caller = oidc
        .authenticate(&bearer(&sign(&k1, &claims(&issuer))), &Peer::default())
        .unwrap()
        .unwrap();
    assert_eq!(
        (caller.name.as_str(), caller.roles.clone(), caller.via),
        (
            "ann",
            vec!["dba".to_owned(), "oncall".to_owned()],
            Via::Oidc
        )
    );
    // An access token for the API's audience is taken too.
    let mut api = claims(&issuer);
    api["aud"] = json!(["spindle-api"]);
    assert!(
        oidc.authenticate(&bearer(&sign(&k1, &api)), &Peer::default())
            .is_ok()
    );

    let mut expired = claims(&issuer);
    expired["exp"] = json!(now_secs() - 3600);
    let why = refused(&oidc, &sign(&k1, &expired));
    assert_eq!(
        why,
        "the OpenID Connect token is not valid: it has expired; sign in again"
    );

    let mut other_audience = claims(&issuer);
    other_audience["aud"] = json!("another-app");
    let why = refused(&oidc, &sign(&k1, &other_audience));
    assert!(
        why.contains("it is for another audience; expected one of: spindle, spindle-api"),
        "{why}"
    );

    let mut other_issuer = claims(&issuer);
    other_issuer["iss"] = json!("https://evil.example.com");
    let why = refused(&oidc, &sign(&k1, &other_issuer));
    assert!(why.contains("it was issued by another issuer"), "{why}");

    // Signed by a key the provider does not publish, or by another key under its kid.
    let why = refused(&oidc, &sign(&key("k9"), &claims(&issuer)));
    assert!(
        why.contains("it is signed by key \"k9\", which the provider does not publish"),
        "{why}"
    );
    let why = refused(&oidc, &sign(&key("k1"), &claims(&issuer)));
    assert!(
        why.contains("its signature does not match the provider's key"),
        "{why}"
    );

    // Unsigned.
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
    let body = URL_SAFE_NO_PAD.encode(claims(&issuer).to_string());
    let why = refused(&oidc, &format!("{header}.{body}."));
    assert!(why.contains("it is not signed (alg none)"), "{why}");

    // A token of Spindle's own is another authenticator's.
    assert!(
        oidc.authenticate(&bearer("spindle_abc123"), &Peer::default())
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn rotated_keys_are_read_again_when_a_token_names_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let k1 = key("k1");
    let (issuer, provider) = provider(&k1).await;
    let oidc = oidc(&issuer, dir.path()).await;
    let k2 = key("k2");
    provider.lock().unwrap().published = vec![k2.jwk.clone()];
    let token = sign(&k2, &claims(&issuer));
    let reads = provider.lock().unwrap().jwks_reads;
    // What a request's authentication does: prepare, then authenticate.
    oidc.prepare(&token).await;
    assert_eq!(provider.lock().unwrap().jwks_reads, reads + 1);
    let caller = oidc
        .authenticate(&bearer(&token), &Peer::default())
        .unwrap();
    assert_eq!(caller.unwrap().name, "ann");
    // A key never published is not read again and again.
    oidc.prepare(&sign(&key("k7"), &claims(&issuer))).await;
    assert_eq!(provider.lock().unwrap().jwks_reads, reads + 1);
}

#[tokio::test]
async fn a_sign_in_checks_its_state_pkce_and_nonce_and_cannot_be_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let k1 = key("k1");
    let (issuer, _provider) = provider(&k1).await;
    let oidc = oidc(&issuer, dir.path()).await;
    let sign_in = oidc.begin("/requests/r1").unwrap();
    assert!(
        sign_in.url.starts_with(&format!("{issuer}/authorize?")),
        "{}",
        sign_in.url
    );
    // The browser goes to the provider, which sends it back with a code.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let back = http.get(&sign_in.url).send().await.unwrap();
    let location = url::Url::parse(back.headers()["location"].to_str().unwrap()).unwrap();
    assert!(
        location
            .as_str()
            .starts_with("https://spindle.example.com/ui/oidc/callback?")
    );
    let query: HashMap<String, String> = location.query_pairs().into_owned().collect();
    assert_eq!(query["state"], sign_in.state);

    // Another browser's state: refused before the sign-in is taken.
    let err = Oidc::same_browser(&query["state"], Some("other")).unwrap_err();
    assert!(
        err.to_string()
            .contains("not the one this browser's sign-in began with"),
        "{err}"
    );
    Oidc::same_browser(&query["state"], Some(&sign_in.state)).unwrap();
    let done = oidc
        .finish(&query["code"], Some(&sign_in.kept))
        .await
        .unwrap();
    assert_eq!(done.caller.name, "ann");
    assert_eq!(done.next, "/requests/r1");
    assert!(done.expires_in > Duration::from_secs(3000));
    assert!(
        oidc.authenticate(&bearer(&done.id_token), &Peer::default())
            .unwrap()
            .is_some()
    );
    // Nothing kept (taken already, expired, never begun): refused.
    let err = oidc.finish(&query["code"], None).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "sign-in refused: the state is unknown, expired or was used already; sign in again"
    );
    assert_eq!(err.status(), 401);
    // Another sign-in's nonce: the provider's token carries this one's, refused.
    let other = oidc.begin("/").unwrap();
    let back = http.get(&sign_in.url).send().await.unwrap();
    let location = url::Url::parse(back.headers()["location"].to_str().unwrap()).unwrap();
    let query: HashMap<String, String> = location.query_pairs().into_owned().collect();
    assert!(
        oidc.finish(&query["code"], Some(&other.kept))
            .await
            .is_err()
    );
    // Somewhere else to go than this server: the start page instead.
    for elsewhere in ["https://evil.example.com/", "//evil.example.com/x"] {
        let sign_in = oidc.begin(elsewhere).unwrap();
        let kept: serde_json::Value = serde_json::from_str(&sign_in.kept).unwrap();
        assert_eq!(kept["next"], "/");
    }
}

#[test]
fn a_misconfigured_provider_says_what_was_expected() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new;
    let err = Oidc::new(
        &OidcConfig {
            issuer: "login.example.com".to_owned(),
            client_id: "x".to_owned(),
            ..OidcConfig::default()
        },
        http(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("auth.oidc.issuer: \"login.example.com\" is not an http(s) URL"),
        "{err}"
    );
    let err = Oidc::new(
        &OidcConfig {
            issuer: "https://login.example.com".to_owned(),
            ..OidcConfig::default()
        },
        http(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("auth.oidc.client_id: expected"), "{err}");
}

/// A provider that cannot be reached is an error that names its URL and keeps the
/// client's error as its source (logged with it), not flattened into text.
#[tokio::test]
async fn an_unreachable_provider_keeps_the_cause() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let issuer = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let oidc = Oidc::new(
        &OidcConfig {
            issuer: issuer.clone(),
            client_id: "x".to_owned(),
            ..OidcConfig::default()
        },
        reqwest::Client::new(),
    )
    .unwrap();
    let err = oidc.discover().await.unwrap_err();
    match &err {
        super::OidcError::Provider { url, source, .. } => {
            assert_eq!(url, &format!("{issuer}/.well-known/openid-configuration"));
            assert!(source.is_some(), "{err:?}");
        }
        other => panic!("not the provider's error: {other:?}"),
    }
    assert!(std::error::Error::source(&err).is_some(), "{err:?}");
    assert!(matches!(oidc.begin("/"), Err(super::OidcError::NotReached)));
}
