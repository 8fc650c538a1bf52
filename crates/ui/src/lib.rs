//! Spindle's web UI, served by the Request Manager beside its API: the request list,
//! a request's page (its chain drawn live, a job's tries and output, stop, start
//! again), the start form of each request type, and the Job Runners.
//!
//! Pages are one HTML shell each (`pages.rs`) with no inline script or style; the
//! script (`assets/js/`, native ES modules served as they are under `/ui/js/`) builds everything from JSON with `textContent`, so a value
//! is never markup. It reads Spin Cycle's API (`/api/v1`, creating and stopping through
//! it) and this crate's view endpoints (`views.rs`, under `/ui/api`): the layout of a
//! request's chain for the groups the viewer opened (`layout.rs`, computed here in
//! Rust), and its states, polled while it runs: only what is drawn, never the chain.
//! Every file is embedded in the binary; a page loads nothing from elsewhere.

mod kept;
pub mod layout;
mod oidc;
mod pages;
mod session;
mod views;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::Response;

pub use pages::escape;
pub use views::Views;

/// Headers every UI response carries: no inline script or style, nothing loaded from
/// elsewhere, not framed by other sites.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The UI's routes, to merge into the Request Manager's router.
pub fn router(manager: Arc<rm::Manager>) -> Router {
    let views = Arc::new(Views::new(manager.clone()));
    // Signing in with the identity provider: before anyone is known.
    let sign_in = Router::new()
        .route("/ui/oidc/login", axum::routing::get(oidc::login))
        .route("/ui/oidc/callback", axum::routing::get(oidc::callback))
        .with_state(manager.clone());
    let session = Router::new()
        .route("/ui/api/me", axum::routing::get(session::me))
        .route(
            "/ui/api/session",
            axum::routing::post(session::sign_in).delete(session::sign_out),
        )
        .with_state(manager.clone());
    // The view endpoints are the API's: the same authentication, and the same refusal
    // of state changes from other sites.
    let api = views::routes(views)
        .merge(session)
        .layer(axum::middleware::from_fn_with_state(
            manager,
            rm::authenticate,
        ))
        .layer(axum::middleware::from_fn(rm::same_origin_changes));
    pages::routes()
        .merge(sign_in)
        .merge(api)
        .layer(axum::middleware::map_response(
            |mut response: Response| async move {
                let headers = response.headers_mut();
                headers.insert(
                    header::CONTENT_SECURITY_POLICY,
                    HeaderValue::from_static(CONTENT_SECURITY_POLICY),
                );
                headers.insert(
                    header::X_CONTENT_TYPE_OPTIONS,
                    HeaderValue::from_static("nosniff"),
                );
                headers.insert(
                    header::REFERRER_POLICY,
                    HeaderValue::from_static("same-origin"),
                );
                headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
                response
            },
        ))
}

#[cfg(test)]
mod oidc_tests;
#[cfg(test)]
mod tests;
