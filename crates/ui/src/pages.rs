//! The HTML shells of the UI's pages and its embedded files. A shell names its page and
//! its subject (a request id, a request type) in `data-` attributes, escaped; the
//! script does the rest.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

/// The page script: native ES modules (`assets/js/`), embedded and served as they are
/// under `/ui/js/` (no build step). `main.js` is the entry; `common.js` holds what every
/// page shares; each page is a module of its own.
pub const SCRIPTS: [(&str, &str); 11] = [
    ("common.js", include_str!("../assets/js/common.js")),
    ("list.js", include_str!("../assets/js/list.js")),
    ("request.js", include_str!("../assets/js/request.js")),
    (
        "request-header.js",
        include_str!("../assets/js/request-header.js"),
    ),
    (
        "request-graph.js",
        include_str!("../assets/js/request-graph.js"),
    ),
    (
        "request-job.js",
        include_str!("../assets/js/request-job.js"),
    ),
    (
        "request-log.js",
        include_str!("../assets/js/request-log.js"),
    ),
    (
        "request-elements.js",
        include_str!("../assets/js/request-elements.js"),
    ),
    ("start.js", include_str!("../assets/js/start.js")),
    ("admin.js", include_str!("../assets/js/admin.js")),
    ("main.js", include_str!("../assets/js/main.js")),
];
const APP_CSS: &str = include_str!("../assets/app.css");
const FAVICON: &str = include_str!("../assets/favicon.svg");

/// Escapes text for HTML content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One page: its title, the page the script draws and its subject.
fn shell(title: &str, page: &str, subject: &str) -> Html<String> {
    Html(format!(
        r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>{title} · Spindle</title>
<link rel="icon" href="/ui/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/ui/app.css">
<script type="module" src="/ui/js/main.js"></script>
</head>
<body data-page="{page}" data-subject="{subject}">
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<a class="brand" href="/">Spindle</a>
<nav aria-label="Main">
<a href="/" data-nav="list">Requests</a>
<a href="/start" data-nav="start">Start</a>
<a href="/runners" data-nav="runners">Job Runners</a>
<a href="/schedules" data-nav="schedules">Schedules</a>
</nav>
<div class="who" id="who"></div>
</header>
<main id="main" tabindex="-1">
<h1 id="title">{title}</h1>
<noscript><p class="error">Spindle's pages need JavaScript; the API is at <a href="/api/v1/openapi.json">/api/v1</a>.</p></noscript>
</main>
</body>
</html>
"##,
        title = escape(title),
        page = escape(page),
        subject = escape(subject),
    ))
}

async fn list() -> Html<String> {
    shell("Requests", "list", "")
}

async fn request(Path(id): Path<String>) -> Html<String> {
    shell(&format!("Request {id}"), "request", &id)
}

async fn start_any() -> Html<String> {
    shell("Start a request", "start", "")
}

async fn start(Path(request_type): Path<String>) -> Html<String> {
    shell(&format!("Start {request_type}"), "start", &request_type)
}

async fn runners() -> Html<String> {
    shell("Job Runners", "runners", "")
}

async fn schedules() -> Html<String> {
    shell("Schedules", "schedules", "")
}

async fn sign_in() -> Html<String> {
    shell("Sign in", "sign-in", "")
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            // Embedded in the binary: the same for a server's whole life.
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// One of the page script's modules, by its file name; 404 for any other.
async fn script(Path(file): Path<String>) -> Response {
    match SCRIPTS.iter().find(|(name, _)| *name == file) {
        Some((_, text)) => asset("text/javascript; charset=utf-8", text),
        None => (
            StatusCode::NOT_FOUND,
            format!("no script {file:?}; expected one of the page script's modules"),
        )
            .into_response(),
    }
}

pub(crate) fn routes() -> Router {
    Router::new()
        .route("/", get(list))
        .route("/requests/{id}", get(request))
        .route("/start", get(start_any))
        .route("/start/{request_type}", get(start))
        .route("/runners", get(runners))
        .route("/schedules", get(schedules))
        .route("/sign-in", get(sign_in))
        .route("/ui/js/{file}", get(script))
        .route(
            "/ui/app.css",
            get(|| async { asset("text/css; charset=utf-8", APP_CSS) }),
        )
        .route(
            "/ui/favicon.svg",
            get(|| async { asset("image/svg+xml", FAVICON) }),
        )
}
