//! Single sign-on through the web UI's routes against an identity provider of the
//! test's own: the sign-in goes to the provider and back, the session cookie holds the
//! ID token, which the API then takes; a replayed callback and a bearer token that is
//! expired, for another audience, signed by another key or unsigned are 401s that say
//! why.

use std::collections::HashMap;
use std::sync::Arc;

use auth::testing::{claims, key, provider, sign};
use axum::body::Body;
use axum::http::{Request as HttpRequest, StatusCode, header};
use http_body_util::BodyExt as _;
use rm::testing::FakeJr;
use rm::{Manager, Options};
use serde_json::{Value, json};
use tower::ServiceExt as _;

async fn send(
    router: &axum::Router,
    uri: &str,
    headers: &[(&str, String)],
) -> (StatusCode, axum::http::HeaderMap, String) {
    let mut request = HttpRequest::get(uri);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = router
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

/// The `NAME=VALUE` of cookie `name` a response sets.
fn set_cookie(headers: &axum::http::HeaderMap, name: &str) -> String {
    headers
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|v| v.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} cookie in {headers:?}"))
}

#[tokio::test]
async fn people_sign_in_with_the_provider_and_its_tokens_are_checked() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let k1 = key("k1");
    let (issuer, _idp) = provider(&k1).await;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("client.secret");
    std::fs::write(&secret, "client-secret-1").unwrap();
    // Two Request Managers on one database, each its own provider client: a sign-in
    // begun on one is finished on the other (issue #48, point 5).
    let manager = async || {
        let oidc = auth::oidc::Oidc::new(
            &auth::oidc::OidcConfig {
                issuer: issuer.clone(),
                client_id: "spindle".to_owned(),
                client_secret: Some(auth::oidc::SecretSource {
                    file: Some(secret.clone()),
                    env: None,
                }),
                redirect_url: Some("http://127.0.0.1:9/ui/oidc/callback".to_owned()),
                ..auth::oidc::OidcConfig::default()
            },
            reqwest::Client::new(),
        )
        .unwrap();
        oidc.discover().await.unwrap();
        let auth = auth::Auth {
            authenticators: vec![Arc::new(oidc)],
            acls: auth::Acls::new(HashMap::new()),
            admin_roles: Vec::new(),
            strict: false,
            read_roles: Some(vec!["dba".to_owned()]),
            service_roles: vec!["spindle".to_owned()],
            metrics_roles: vec!["metrics".to_owned()],
        };
        let store = Arc::new(
            store::SqliteStore::open(&dir.path().join("ui.db"))
                .await
                .unwrap(),
        );
        let report = spec::lint_str(std::path::Path::new("specs.yaml"), "sequences: {}\n");
        let manager: Arc<Manager> = Arc::new(Manager::new(
            graph::Grapher::new(report.specs, Arc::new(job::Registry::builtin())),
            store,
            Arc::new(FakeJr::default()),
            Options {
                auth: Some(Arc::new(auth)),
                ..Options::default()
            },
        ));
        rm::router(manager.clone()).merge(crate::router(manager))
    };
    let router = manager().await;
    let other = manager().await;

    // The sign-in page offers single sign-on.
    let (_, _, me) = send(&router, "/ui/api/me", &[]).await;
    let me: Value = serde_json::from_str(&me).unwrap();
    assert_eq!(
        (me["oidc"].clone(), me["signedIn"].clone()),
        (json!(true), json!(false))
    );

    // Off to the provider, with a state cookie; the provider sends the browser back.
    let (status, headers, _) = send(&router, "/ui/oidc/login?next=/requests/r1", &[]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let state_cookie = set_cookie(&headers, "spindle_oidc_state");
    assert!(
        state_cookie.contains("HttpOnly") && state_cookie.contains("SameSite=Lax"),
        "{state_cookie}"
    );
    let state_pair = state_cookie.split(';').next().unwrap().to_owned();
    let to_provider = headers["location"].to_str().unwrap().to_owned();
    assert!(
        to_provider.starts_with(&format!("{issuer}/authorize?")),
        "{to_provider}"
    );
    let no_follow = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let back = no_follow.get(&to_provider).send().await.unwrap();
    let back = url::Url::parse(back.headers()["location"].to_str().unwrap()).unwrap();
    let callback = format!("/ui/oidc/callback?{}", back.query().unwrap());

    // Back without the browser's state cookie: refused.
    let (status, _, page) = send(&router, &callback, &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{page}");
    assert!(
        page.contains("not the one this browser&#39;s sign-in began with"),
        "{page}"
    );
    // With it, on the other Request Manager: signed in, the ID token in the session
    // cookie, and on to `next`.
    let (status, headers, page) = send(&other, &callback, &[("cookie", state_pair.clone())]).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{page}");
    assert_eq!(headers["location"], "/requests/r1");
    let session = set_cookie(&headers, auth::TOKEN_COOKIE);
    assert!(
        session.contains("HttpOnly")
            && session.contains("Secure")
            && session.contains("SameSite=Strict"),
        "{session}"
    );
    let session_pair = session.split(';').next().unwrap().to_owned();
    let (_, _, me) = send(&router, "/ui/api/me", &[("cookie", session_pair.clone())]).await;
    let me: Value = serde_json::from_str(&me).unwrap();
    assert_eq!(
        (&me["signedIn"], &me["user"], &me["via"], &me["roles"]),
        (
            &json!(true),
            &json!("ann"),
            &json!("oidc"),
            &json!(["dba", "oncall"])
        )
    );
    // The groups are roles: `dba` may read.
    let (status, _, body) = send(&router, "/api/v1/requests", &[("cookie", session_pair)]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The same callback again: its state was used.
    let (status, _, page) = send(&router, &callback, &[("cookie", state_pair)]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        page.contains("the state is unknown, expired or was used already"),
        "{page}"
    );

    // Bearer tokens at the API.
    let bearer = |token: String| vec![("authorization", format!("Bearer {token}"))];
    let (status, _, body) = send(
        &router,
        "/api/v1/requests",
        &bearer(sign(&k1, &claims(&issuer))),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut expired = claims(&issuer);
    expired["exp"] = json!(1_000_000);
    let mut audience = claims(&issuer);
    audience["aud"] = json!("another-app");
    let unsigned = format!(
        "{}.{}.",
        base64_url(br#"{"alg":"none"}"#),
        base64_url(claims(&issuer).to_string().as_bytes())
    );
    for (token, why) in [
        (sign(&k1, &expired), "it has expired; sign in again"),
        (
            sign(&k1, &audience),
            "it is for another audience; expected one of: spindle",
        ),
        (
            sign(&key("k1"), &claims(&issuer)),
            "its signature does not match the provider's key",
        ),
        (
            sign(&key("k2"), &claims(&issuer)),
            "it is signed by key \"k2\", which the provider does not publish",
        ),
        (unsigned, "it is not signed (alg none)"),
    ] {
        let (status, _, body) = send(&router, "/api/v1/requests", &bearer(token)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert!(
            body["message"].as_str().unwrap().contains(why),
            "{body}\nexpected: {why}"
        );
    }
}

fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
