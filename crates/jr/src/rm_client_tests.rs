//! The Job Runner's client of the Request Managers over HTTP: reports go to whichever
//! answers and fencing is recognised; a registration is refused by a manager of an API
//! version the runner cannot work with.

use axum::http::StatusCode;

/// Reports go to whichever Request Manager answers; a 409 that says it is fenced is a
/// fenced report.
#[tokio::test]
async fn reports_go_to_whichever_request_manager_answers_and_fencing_is_recognised() {
    use axum::routing::post;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let app = axum::Router::new().route(
        "/api/v1/job-logs",
        post(|headers: axum::http::HeaderMap| async move {
            if headers.get("spindle-epoch").map(|v| v.as_bytes()) == Some(b"2") {
                (
                    StatusCode::CONFLICT,
                    [("spindle-fenced", "true")],
                    r#"{"message": "owned by another", "httpStatus": 409}"#,
                )
                    .into_response()
            } else {
                StatusCode::CREATED.into_response()
            }
        }),
    );
    use axum::response::IntoResponse as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    // The first URL answers nothing (a port with no server).
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_url = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let client = crate::HttpRmClient::new(&[dead_url, url], reqwest::Client::new());
    use crate::Reporters as _;
    let owner = client.for_chain(proto::Fence {
        instance: "i".to_owned(),
        epoch: 1,
    });
    owner.job_logs(&[]).await.unwrap();
    let stale = client.for_chain(proto::Fence {
        instance: "i".to_owned(),
        epoch: 2,
    });
    let err = stale.job_logs(&[]).await.unwrap_err();
    assert_eq!(err.kind, chain::ReportErrorKind::Fenced, "{err}");
    assert!(err.message.contains("owned by another"), "{err}");
}

/// Issue #48, point 4: a Request Manager that answers a registration with an API version
/// more than one apart from the runner's is refused by the runner, which says why; one
/// that names none is of version 1, as one that names a neighbour version works.
#[tokio::test]
async fn a_runner_refuses_a_request_manager_of_an_api_version_it_cannot_work_with() {
    use crate::lease::{Registry as _, RegistryError};
    use axum::response::IntoResponse as _;
    use axum::routing::post;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runner = serde_json::json!({
        "instanceId": "i-1", "url": "http://jr", "startedAt": "2026-12-05T00:00:00Z",
        "renewedAt": "2026-12-05T00:00:00Z", "lease": "10s", "state": "live"
    });
    let serve = async |version: Option<&'static str>| {
        let runner = runner.clone();
        let app = axum::Router::new().route(
            "/api/v1/job-runners",
            post(move || async move {
                let mut answer = (StatusCode::CREATED, axum::Json(runner.clone())).into_response();
                if let Some(version) = version {
                    answer.headers_mut().insert(
                        proto::API_VERSION_HEADER,
                        axum::http::HeaderValue::from_static(version),
                    );
                }
                answer
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        crate::HttpRmClient::new(&[url], reqwest::Client::new())
    };
    let registration = proto::RunnerRegistration {
        instance_id: "i-1".to_owned(),
        url: "http://jr".to_owned(),
        lease: "10s".to_owned(),
        ..proto::RunnerRegistration::default()
    };
    for version in [None, Some("1"), Some("2")] {
        let client = serve(version).await;
        let registered = client.register(&registration).await;
        assert!(registered.is_ok(), "{version:?}: {registered:?}");
    }
    for version in ["7", "not a number"] {
        let client = serve(Some(version)).await;
        let err = client.register(&registration).await.unwrap_err();
        assert!(matches!(err, RegistryError::Incompatible(_)), "{err}");
        let said = err.to_string();
        assert!(
            said.contains("this Job Runner speaks version 1")
                && said.contains("versions 1 to 2")
                && said.contains("Upgrading"),
            "{said}"
        );
    }
}

/// Issue #51: when thousands of chains report at once (each suspends at a shutdown), at
/// most [`crate::rm_client::REPORTS_IN_FLIGHT`] are in flight, and the runner's lease
/// renewal does not queue behind the rest: with every report held by the manager, the
/// renewal is answered.
#[tokio::test]
async fn a_flood_of_reports_keeps_a_bound_in_flight_and_lets_the_renewal_through() {
    use crate::lease::Registry as _;
    use axum::routing::put;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let in_flight = std::sync::Arc::new(AtomicUsize::new(0));
    let release = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let app = axum::Router::new()
        .route(
            "/api/v1/requests/{id}/suspend",
            put({
                let (in_flight, release) = (in_flight.clone(), release.clone());
                move || async move {
                    in_flight.fetch_add(1, Ordering::SeqCst);
                    release.acquire().await.unwrap().forget();
                    StatusCode::NO_CONTENT
                }
            }),
        )
        .route(
            "/api/v1/job-runners/{instance}/lease",
            put(|| async {
                axum::Json(serde_json::json!({
                    "instanceId": "i", "url": "http://jr", "startedAt": "2026-12-06T00:00:00Z",
                    "renewedAt": "2026-12-06T00:00:01Z", "lease": "10s", "state": "live"
                }))
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = crate::HttpRmClient::new(&[url], reqwest::Client::new());
    let bound = crate::rm_client::REPORTS_IN_FLIGHT;
    let mut reports = Vec::new();
    for n in 0..bound + 40 {
        use crate::Reporters as _;
        let reporter = client.for_chain(proto::Fence {
            instance: "i".to_owned(),
            epoch: 1,
        });
        reports.push(tokio::spawn(async move {
            let suspended = proto::SuspendedJobChain {
                request_id: format!("r{n}"),
                ..Default::default()
            };
            reporter.suspend(&suspended).await
        }));
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while in_flight.load(Ordering::SeqCst) < bound {
        assert!(std::time::Instant::now() < until, "reports never arrived");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(
        in_flight.load(Ordering::SeqCst),
        bound,
        "no more than the bound"
    );
    let renewal = proto::LeaseRenewal::default();
    let renewed = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        client.renew("i", Some(&renewal)),
    )
    .await
    .expect("the renewal waited behind the reports");
    assert!(renewed.is_ok(), "{renewed:?}");
    release.add_permits(bound + 40);
    for report in reports {
        report.await.unwrap().unwrap();
    }
    assert_eq!(in_flight.load(Ordering::SeqCst), bound + 40);
}
