//! What both services' routers share: the routes a service answers about itself and the
//! layers every answer passes through.

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::metrics::{Metrics, track_http};

/// Adds the routes a service answers about itself: its OpenAPI document `openapi` at
/// `/api/v1/openapi.json`, its `version` at `/version` and liveness at `/healthz`.
pub fn about_routes<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    openapi: &'static str,
    version: String,
) -> Router<S> {
    router
        .route("/api/v1/openapi.json", get(move || json(openapi)))
        .route("/version", get(move || async move { version }))
        .route("/healthz", get(|| json(r#"{"status":"ok"}"#)))
}

/// `body`, a JSON document.
async fn json(body: &'static str) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], body)
}

/// The layers both services' routers end with: every answer carries Spin Cycle's
/// `x-spincycle-version` header and, with metrics on, every request is counted by
/// [`track_http`].
pub fn outer_layers<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    version: HeaderValue,
    metrics: Option<Arc<Metrics>>,
) -> Router<S> {
    let router = router.layer(axum::middleware::map_response(
        move |mut response: Response| {
            let version = version.clone();
            async move {
                response
                    .headers_mut()
                    .insert("x-spincycle-version", version);
                response
            }
        },
    ));
    match metrics {
        Some(metrics) => router.layer(axum::middleware::from_fn_with_state(metrics, track_http)),
        None => router,
    }
}
