//! Signing in to the web UI with the OpenID Connect provider (issue #33): `/ui/oidc/login`
//! begins the authorization code flow (`auth::oidc::Oidc::begin`: state, nonce, PKCE) and
//! sends the browser to the provider, keeping the sign-in's state in a cookie that binds
//! it to this browser; `/ui/oidc/callback` finishes it (the state checked against the
//! cookie and used once, the code exchanged, the ID token's nonce checked) and keeps the
//! ID token in the session cookie (HttpOnly, Secure, SameSite=Strict), which the API
//! then takes like a bearer token.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use rm::Manager;
use serde::Deserialize;

/// The cookie that holds a sign-in's state while the browser is at the provider.
const STATE_COOKIE: &str = "spindle_oidc_state";

#[derive(Debug, Deserialize)]
pub(crate) struct LoginQuery {
    next: Option<String>,
}

/// A page that says why a sign-in failed, with a way to try again (every value escaped).
fn refused(status: StatusCode, why: &str) -> Response {
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sign-in failed · Spindle</title>\
         <link rel=\"stylesheet\" href=\"/ui/app.css\"></head><body><main><h1>Sign-in failed</h1>\
         <p id=\"sign-in-error\">{}</p><p><a href=\"/sign-in\">Sign in again</a></p></main></body></html>",
        crate::escape(why)
    );
    (status, Html(body)).into_response()
}

fn state_cookie(value: &str, max_age: u64) -> HeaderValue {
    // Lax: the provider's redirect back is a top-level navigation from another site.
    HeaderValue::from_str(&format!(
        "{STATE_COOKIE}={value}; Path=/ui/oidc; HttpOnly; Secure; SameSite=Lax; Max-Age={max_age}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("spindle_oidc_state=; Path=/ui/oidc; Max-Age=0"))
}

fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .flat_map(|value| value.to_str().unwrap_or_default().split(';'))
        .find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name && !value.is_empty()).then_some(value)
        })
}

/// `GET /ui/oidc/login?next=PATH`: off to the provider.
pub(crate) async fn login(
    State(manager): State<Arc<Manager>>,
    Query(query): Query<LoginQuery>,
) -> Response {
    let auth = manager.auth();
    let Some(oidc) = auth.as_ref().and_then(|auth| auth.oidc()) else {
        return refused(
            StatusCode::NOT_FOUND,
            "this server has no single sign-on (the config's auth.oidc sets one up)",
        );
    };
    let begun = match oidc.begin(query.next.as_deref().unwrap_or("/")) {
        Ok(sign_in) => manager
            .keep_sign_in(&sign_in)
            .await
            .map(|()| sign_in)
            .map_err(|err| {
                tracing::warn!(error = %err.chain(), "sign-in: keeping it in the database failed");
                format!("the sign-in cannot begin now ({err}); try again shortly")
            }),
        Err(why) => Err(why.to_string()),
    };
    match begun {
        Ok(sign_in) => {
            let mut response = Redirect::to(&sign_in.url).into_response();
            response
                .headers_mut()
                .insert(header::SET_COOKIE, state_cookie(&sign_in.state, 600));
            response
        }
        Err(why) => refused(StatusCode::SERVICE_UNAVAILABLE, &why),
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /ui/oidc/callback?code=...&state=...`: back from the provider.
pub(crate) async fn callback(
    State(manager): State<Arc<Manager>>,
    Query(query): Query<CallbackQuery>,
    headers: HeaderMap,
) -> Response {
    let auth = manager.auth();
    let Some(oidc) = auth.as_ref().and_then(|auth| auth.oidc()) else {
        return refused(StatusCode::NOT_FOUND, "this server has no single sign-on");
    };
    if let Some(error) = &query.error {
        return refused(
            StatusCode::UNAUTHORIZED,
            &format!(
                "the identity provider said {error}: {}",
                query
                    .error_description
                    .as_deref()
                    .unwrap_or("no reason given")
            ),
        );
    }
    let (Some(code), Some(state)) = (&query.code, &query.state) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "the provider sent no code and state; expected ?code=...&state=...",
        );
    };
    if let Err(denied) = auth::oidc::Oidc::same_browser(state, cookie_value(&headers, STATE_COOKIE))
    {
        tracing::info!(reason = %denied, "sign-in refused");
        return refused(StatusCode::UNAUTHORIZED, &denied.to_string());
    }
    // Begun here or on another Request Manager: kept in the database.
    let kept = match manager.take_sign_in(state).await {
        Ok(kept) => kept,
        Err(err) => {
            tracing::warn!(error = %err.chain(), "sign-in: reading it from the database failed");
            return refused(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the sign-in cannot be finished now ({err}); sign in again shortly"),
            );
        }
    };
    match oidc.finish(code, kept.as_deref()).await {
        Ok(signed_in) => {
            tracing::info!(
                user = signed_in.caller.name,
                "signed in with single sign-on"
            );
            let mut response = Redirect::to(&signed_in.next).into_response();
            let cookies = response.headers_mut();
            cookies.append(
                header::SET_COOKIE,
                crate::session::cookie(&signed_in.id_token, Some(signed_in.expires_in.as_secs())),
            );
            cookies.append(header::SET_COOKIE, state_cookie("", 0));
            response
        }
        Err(denied) => {
            tracing::warn!(error = %denied, "a single sign-on was refused");
            let mut response = refused(StatusCode::UNAUTHORIZED, &denied.to_string());
            response
                .headers_mut()
                .insert(header::SET_COOKIE, state_cookie("", 0));
            response
        }
    }
}
