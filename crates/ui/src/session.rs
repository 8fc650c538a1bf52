//! Signing in and out of the web UI, and who the viewer is. With authentication on, a
//! token is kept in a cookie (HttpOnly: no script reads it; Secure; SameSite=Strict:
//! never sent by another site's page), which the Request Manager's authentication reads
//! like a bearer token; behind an authenticating proxy there is nothing to sign in to.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rm::{Error, Manager};
use serde::{Deserialize, Serialize};

/// What `GET /ui/api/me` answers.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Me {
    /// Whether the server authenticates at all; when not, everything is allowed.
    auth: bool,
    signed_in: bool,
    user: String,
    roles: Vec<String>,
    admin: bool,
    /// How the viewer is known: `token` (signed in here), `oidc` (single sign-on),
    /// `proxy`, `certificate`.
    via: String,
    /// Whether people may sign in with the OpenID Connect provider (`/ui/oidc/login`).
    oidc: bool,
    /// With `?type=T`: whether the viewer may start and stop requests of that type.
    #[serde(skip_serializing_if = "Option::is_none")]
    may: Option<May>,
}

#[derive(Debug, Serialize)]
pub(crate) struct May {
    start: bool,
    stop: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct MeQuery {
    #[serde(rename = "type")]
    request_type: Option<String>,
}

pub(crate) async fn me(
    State(manager): State<Arc<Manager>>,
    peer: Option<axum::Extension<auth::Peer>>,
    Query(query): Query<MeQuery>,
    headers: HeaderMap,
) -> Json<Me> {
    let Some(auth) = manager.auth() else {
        return Json(Me {
            auth: false,
            signed_in: false,
            user: String::new(),
            roles: Vec::new(),
            admin: false,
            via: String::new(),
            oidc: false,
            may: query.request_type.map(|_| May {
                start: true,
                stop: true,
            }),
        });
    };
    let peer = peer.map(|p| p.0).unwrap_or_default();
    let oidc = auth.oidc().is_some();
    auth.prepare(&headers).await;
    match auth.authenticate(&headers, &peer) {
        Ok(caller) => {
            let may = query.request_type.map(|t| May {
                start: auth.authorize(&caller, "start", &t).is_ok(),
                stop: auth.authorize(&caller, "stop", &t).is_ok(),
            });
            Json(Me {
                auth: true,
                signed_in: true,
                admin: auth.is_admin(&caller),
                via: match caller.via {
                    auth::Via::Token => "token",
                    auth::Via::ClientCertificate => "certificate",
                    auth::Via::Proxy => "proxy",
                    auth::Via::Custom => "custom",
                    auth::Via::Oidc => "oidc",
                }
                .to_owned(),
                user: caller.name,
                roles: caller.roles,
                oidc,
                may,
            })
        }
        Err(_) => Json(Me {
            auth: true,
            signed_in: false,
            user: String::new(),
            roles: Vec::new(),
            admin: false,
            via: String::new(),
            oidc,
            may: None,
        }),
    }
}

#[derive(Debug, Deserialize)]
struct SignIn {
    token: String,
}

pub(crate) fn cookie(value: &str, max_age: Option<u64>) -> HeaderValue {
    let age = max_age.map_or(String::new(), |s| format!("; Max-Age={s}"));
    HeaderValue::from_str(&format!(
        "{}={value}; Path=/; HttpOnly; Secure; SameSite=Strict{age}",
        auth::TOKEN_COOKIE
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("spindle_token=; Path=/; Max-Age=0"))
}

/// `POST /ui/api/session` `{"token": ...}`: checks the token, then keeps it in the cookie.
pub(crate) async fn sign_in(
    State(manager): State<Arc<Manager>>,
    peer: Option<axum::Extension<auth::Peer>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Error> {
    let Some(auth) = manager.auth() else {
        return Err(Error::Conflict(
            "this server does not authenticate: there is nothing to sign in to".to_owned(),
        ));
    };
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_json {
        return Err(Error::UnsupportedMediaType(
            "Unsupported Media Type: the body must be JSON with Content-Type: application/json"
                .to_owned(),
        ));
    }
    let SignIn { token } = serde_json::from_slice(&body)
        .map_err(|err| Error::BadRequest(format!("invalid sign-in ({{\"token\": ...}}): {err}")))?;
    let token = token.trim().to_owned();
    if token.is_empty() || token.chars().any(|c| !c.is_ascii_graphic() || c == ';') {
        return Err(Error::BadRequest(
            "the token is empty or has characters no token has".to_owned(),
        ));
    }
    let mut check = HeaderMap::new();
    check.insert(
        header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| Error::BadRequest("the token is not valid".to_owned()))?,
    );
    let peer = peer.map(|p| p.0).unwrap_or_default();
    auth.prepare(&check).await;
    let caller = auth.authenticate(&check, &peer)?;
    let mut response = (
        StatusCode::OK,
        Json(serde_json::json!({"user": caller.name, "roles": caller.roles})),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, cookie(&token, None));
    Ok(response)
}

/// `DELETE /ui/api/session`: forgets the cookie.
pub(crate) async fn sign_out() -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, cookie("", Some(0)));
    response
}
