//! Who may do what: authentication and the ACLs of request types.

use super::*;

const ACL_SPECS: &str = "sequences:
  deploy:
    request: true
    args:
      required:
        - name: host
    acl:
      - role: deployer
        ops: [start, stop]
      - role: lead
        admin: true
    nodes:
      pause:
        category: job
        type: noop
  open:
    request: true
    nodes:
      pause:
        category: job
        type: noop
";

/// Issue #14: callers × operations → 200/401/403, with Spin Cycle's messages, and no
/// request stored for a denied start.
#[tokio::test]
async fn who_may_create_start_stop_and_read() {
    let token = |name: &str| format!("spindle_test_{name}");
    let line = |name: &str, roles: &[&str]| {
        auth::TokenLine::of(
            &token(name),
            name,
            &roles.iter().map(|r| (*r).to_owned()).collect::<Vec<_>>(),
        )
        .to_string()
    };
    let tokens = auth::Tokens::parse(
        "tokens",
        &[
            line("ann", &["deployer"]),
            line("bob", &["viewer"]),
            line("root", &["ops-admin"]),
            line("nobody", &[]),
            line("jr", &["spindle"]),
            line("prom", &["metrics"]),
        ]
        .join("\n"),
    )
    .unwrap();
    let mut acls = std::collections::HashMap::new();
    acls.insert(
        "deploy".to_owned(),
        vec![
            auth::AclEntry {
                role: "deployer".to_owned(),
                admin: false,
                ops: vec!["start".to_owned(), "stop".to_owned()],
            },
            auth::AclEntry {
                role: "lead".to_owned(),
                admin: true,
                ops: Vec::new(),
            },
        ],
    );
    acls.insert("open".to_owned(), Vec::new());
    let auth = auth::Auth {
        authenticators: vec![
            Arc::new(tokens),
            Arc::new(auth::Proxy {
                user_header: "x-forwarded-user".to_owned(),
                groups_header: "x-forwarded-groups".to_owned(),
                trusted: vec!["10.0.0.0/8".parse().unwrap()],
            }),
        ],
        acls: auth::Acls::new(acls),
        admin_roles: vec!["ops-admin".to_owned()],
        strict: true,
        read_roles: Some(vec!["viewer".to_owned(), "deployer".to_owned()]),
        service_roles: vec!["spindle".to_owned()],
        metrics_roles: vec!["metrics".to_owned()],
    };
    let env = env_specs(
        Options {
            jr_url: Some("http://jr1:32307".to_owned()),
            auth: Some(Arc::new(auth)),
            ..Options::default()
        },
        ACL_SPECS,
    )
    .await;
    let bearer = |name: &str| format!("Bearer {}", token(name));
    let create = r#"{"type": "deploy", "args": {"host": "db1"}, "user": "mallory"}"#;
    // Creating (a start).
    let cases: Vec<(Option<String>, u16, &str)> = vec![
        (
            None,
            401,
            "authentication required: send a token (Authorization: Bearer ...) or a client certificate",
        ),
        (
            Some("Bearer spindle_wrong".to_owned()),
            401,
            "the token is not valid (unknown or revoked)",
        ),
        (
            Some(bearer("bob")),
            403,
            "denied: no caller role matches deploy ACL: caller has [viewer], deploy requires one of [deployer lead]",
        ),
        (
            Some(bearer("nobody")),
            403,
            "denied: no caller role matches deploy ACL: caller has [], deploy requires one of [deployer lead]",
        ),
        (
            Some(bearer("jr")),
            403,
            "denied: no caller role matches deploy ACL: caller has [spindle], deploy requires one of [deployer lead]",
        ),
        (Some(bearer("ann")), 201, ""),
        (Some(bearer("root")), 201, ""),
    ];
    let mut created = Vec::new();
    for (authorization, want, message) in &cases {
        let headers: Vec<(&str, &str)> = authorization
            .iter()
            .map(|a| ("authorization", a.as_str()))
            .collect();
        let (status, body, _) = call_with(
            &env.router,
            Method::POST,
            "/api/v1/requests",
            Some(create),
            &headers,
        )
        .await;
        assert_eq!(status.as_u16(), *want, "{authorization:?}: {body}");
        if *want == 201 {
            created.push(body["id"].as_str().unwrap().to_owned());
        } else {
            assert_eq!(body["message"], *message, "{authorization:?}");
        }
    }
    // The caller is the user, whatever the body says.
    let (_, first, _) = call_with(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{}", created[0]),
        None,
        &[("authorization", &bearer("ann"))],
    )
    .await;
    assert_eq!(first["user"], "ann");
    // Nothing was stored for the denied starts.
    let (_, all, _) = call_with(
        &env.router,
        Method::GET,
        "/api/v1/requests",
        None,
        &[("authorization", &bearer("root"))],
    )
    .await;
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");
    // Strict: a type without ACLs only for admins.
    let open = r#"{"type": "open", "args": {}}"#;
    let (status, body, _) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/requests",
        Some(open),
        &[("authorization", &bearer("ann"))],
    )
    .await;
    assert_eq!(
        (status.as_u16(), body["message"].as_str().unwrap()),
        (
            403,
            "denied: request open has no ACLs and strict auth is enabled"
        )
    );
    // Reading: viewer and deployer roles, admins and services; others 403.
    for (who, want) in [
        ("bob", 200),
        ("ann", 200),
        ("root", 200),
        ("jr", 200),
        ("nobody", 403),
    ] {
        let (status, body, _) = call_with(
            &env.router,
            Method::GET,
            &format!("/api/v1/requests/{}", created[0]),
            None,
            &[("authorization", &bearer(who))],
        )
        .await;
        assert_eq!(status.as_u16(), want, "{who}: {body}");
    }
    let (status, _, _) = call_with(&env.router, Method::GET, "/api/v1/requests", None, &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Issue #33: metrics and readiness follow auth: a monitor's token (a metrics role)
    // and readers get them, nobody else; the monitor reads nothing more. Liveness is open.
    let (status, _, _) = call_with(&env.router, Method::GET, "/healthz", None, &[]).await;
    assert_eq!(status, StatusCode::OK);
    for path in ["/metrics", "/readyz"] {
        let (status, _, _) = call_with(&env.router, Method::GET, path, None, &[]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
        for (who, allowed) in [
            ("prom", true),
            ("bob", true),
            ("jr", true),
            ("nobody", false),
        ] {
            let (status, body, _) = call_with(
                &env.router,
                Method::GET,
                path,
                None,
                &[("authorization", &bearer(who))],
            )
            .await;
            if allowed {
                // Let in: this manager keeps no metrics, which it may say.
                let off = body["message"] == "Not Found: metrics are off (metrics: false)";
                assert!(status.is_success() || off, "{who} {path}: {status} {body}");
            } else {
                assert_eq!(
                    (status.as_u16(), body["message"].as_str().unwrap()),
                    (
                        403,
                        "denied: metrics and readiness require one of the roles [metrics] or a reader's; caller nobody has []"
                    ),
                    "{path}"
                );
            }
        }
    }
    let (status, _, _) = call_with(
        &env.router,
        Method::GET,
        "/api/v1/requests",
        None,
        &[("authorization", &bearer("prom"))],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a monitor reads no requests");
    // Issue #33: a bulk action is authorized per request; its dry run lists only to
    // readers and changes nothing.
    let bulk = |who: &'static str, query: &'static str| {
        let router = env.router.clone();
        let authorization = bearer(who);
        async move {
            call_with(
                &router,
                Method::POST,
                &format!("/api/v1/bulk/stop?{query}"),
                None,
                &[("authorization", &authorization)],
            )
            .await
        }
    };
    let (status, body, _) = bulk("nobody", "type=deploy").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body, _) = bulk("bob", "type=deploy").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["dryRun"], true);
    let outcomes: Vec<(&str, &str)> = body["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["outcome"].as_str().unwrap(),
                r["message"].as_str().unwrap(),
            )
        })
        .collect();
    let denied = "denied: no caller role matches deploy ACL: caller has [viewer], deploy requires one of [deployer lead]";
    assert_eq!(outcomes, [("refused", denied), ("refused", denied)]);
    let (_, body, _) = bulk("ann", "type=deploy").await;
    let outcomes: Vec<&str> = body["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["would", "would"], "{body}");
    let (status, body, _) = bulk("ann", "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("needs a filter"),
        "{body}"
    );
    // A job's locks are taken and released by services only (a Job Runner), not readers.
    let job_locks = format!("/api/v1/requests/{}/job-locks", created[0]);
    let take = r#"{"jobId": "abcd", "locks": [{"name": "pool", "limit": 1}]}"#;
    let release = format!("{job_locks}/abcd");
    for (who, want_take, want_release) in [("bob", 403, 403), ("ann", 403, 403), ("jr", 200, 204)] {
        let headers = [("authorization", bearer(who))];
        let headers: Vec<(&str, &str)> = headers.iter().map(|(h, v)| (*h, v.as_str())).collect();
        let (status, body, _) =
            call_with(&env.router, Method::POST, &job_locks, Some(take), &headers).await;
        assert_eq!(status.as_u16(), want_take, "{who}: {body}");
        let (status, body, _) =
            call_with(&env.router, Method::DELETE, &release, None, &headers).await;
        assert_eq!(status.as_u16(), want_release, "{who}: {body}");
    }
    // Stopping and starting are authorized by the ACL (start: the request is RUNNING).
    let stop = format!("/api/v1/requests/{}/stop", created[0]);
    let start = format!("/api/v1/requests/{}/start", created[0]);
    let (status, body, _) = call_with(
        &env.router,
        Method::PUT,
        &stop,
        None,
        &[("authorization", &bearer("bob"))],
    )
    .await;
    assert_eq!(
        (status.as_u16(), body["message"].as_str().unwrap()),
        (
            403,
            "denied: no caller role matches deploy ACL: caller has [viewer], deploy requires one of [deployer lead]"
        )
    );
    let (status, body, _) = call_with(
        &env.router,
        Method::PUT,
        &start,
        None,
        &[("authorization", &bearer("bob"))],
    )
    .await;
    assert_eq!(status.as_u16(), 403, "{body}");
    let (status, _, _) = call_with(
        &env.router,
        Method::PUT,
        &start,
        None,
        &[("authorization", &bearer("ann"))],
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "allowed, but the request is not PENDING"
    );
    let (status, body, _) = call_with(
        &env.router,
        Method::PUT,
        &stop,
        None,
        &[("authorization", &bearer("ann"))],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The audit trail: who created and stopped it.
    let (status, trail, _) = call_with(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{}/audit", created[0]),
        None,
        &[("authorization", &bearer("bob"))],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let actions: Vec<(&str, &str)> = trail
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["action"].as_str().unwrap(), e["user"].as_str().unwrap()))
        .collect();
    assert_eq!(actions, [("create", "ann"), ("stop", "ann")], "{trail}");
    let (status, _, _) = call_with(
        &env.router,
        Method::PUT,
        "/api/v1/requests/b0gus00000000000000a/stop",
        None,
        &[("authorization", &bearer("bob"))],
    )
    .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "an unknown id is 404 before authorization"
    );
    // What Job Runners do needs a service role.
    let runner = r#"{"instanceId": "jr9-1", "url": "http://jr9:32307", "host": "jr9", "pid": 9, "lease": "10s"}"#;
    let (status, body, _) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/job-runners",
        Some(runner),
        &[("authorization", &bearer("root"))],
    )
    .await;
    assert_eq!(status.as_u16(), 403, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("denied: only Job Runners and Request Managers"),
        "{body}"
    );
    let (status, _, _) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/job-runners",
        Some(runner),
        &[],
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a runner without credentials cannot register"
    );
    let (status, body, _) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/job-runners",
        Some(runner),
        &[("authorization", &bearer("jr"))],
    )
    .await;
    assert!(status.is_success(), "{status}: {body}");
    // Health needs nothing.
    let (status, _, _) = call(&env.router, Method::GET, "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    // The proxy's headers: from its network they name the caller, from elsewhere 401.
    for (addr, want) in [("10.1.2.3:4000", 201), ("192.0.2.9:4000", 401)] {
        let mut request = HttpRequest::builder()
            .method(Method::POST)
            .uri("/api/v1/requests")
            .header("content-type", "application/json")
            .header("x-forwarded-user", "carol")
            .header("x-forwarded-groups", "deployer")
            .body(Body::from(create))
            .unwrap();
        request.extensions_mut().insert(auth::Peer {
            addr: Some(addr.parse().unwrap()),
            certificate: None,
        });
        let response = env.router.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(status, want, "{addr}: {}", String::from_utf8_lossy(&bytes));
        if want == 201 {
            let body: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(body["user"], "carol");
        }
    }
}
