//! Authentication and authorization end to end (issue #14): `spindle token create`, a
//! server that requires tokens, the CLI with and without one, and a Request Manager and
//! a Job Runner that authenticate to each other.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Service, run, spindle};

const SPECS: &str = "sequences:
  deploy:
    request: true
    args:
      required:
        - name: host
          desc: Where
    acl:
      - role: deployer
        ops: [start, stop]
    nodes:
      step:
        category: job
        type: noop
";

/// A token made by `spindle token create`, and its line for the tokens file.
pub(crate) fn token(dir: &Path, user: &str, roles: &[&str]) -> (String, String) {
    let mut command = spindle(dir);
    command.args(["token", "create", "--user", user]);
    for role in roles {
        command.args(["--role", role]);
    }
    let (stdout, stderr, code) = run(&mut command);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("it is shown only now"), "{stderr}");
    let mut lines = stdout.lines();
    let token = lines.next().unwrap().to_owned();
    let line = lines.next().unwrap().to_owned();
    assert!(token.starts_with("spindle_"), "{token}");
    assert!(
        !line.contains(&token),
        "the line holds the hash, not the token"
    );
    let want = format!(" {user}");
    assert!(
        line.starts_with("sha256:") && line.contains(&want),
        "{line}"
    );
    (token, line)
}

/// A folder with [`SPECS`] and a tokens file of these users' tokens (returned in order).
fn folder_with_tokens(users: &[(&str, &[&str])]) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("specs.yaml"), SPECS).unwrap();
    let mut tokens = Vec::new();
    let mut lines = String::new();
    for (user, roles) in users {
        let (token, line) = token(dir.path(), user, roles);
        tokens.push(token);
        lines.push_str(&line);
        lines.push('\n');
    }
    std::fs::write(dir.path().join("tokens"), lines).unwrap();
    (dir, tokens)
}

/// `rm.yaml` (the specs, SQLite, 200 ms rounds, then `rm_extra`) and `jr.yaml` (a Job
/// Runner that takes only the tokens file's callers and presents `service`) in `dir`.
fn write_service_configs(dir: &Path, rm_extra: &str, service: &str) {
    std::fs::write(
        dir.join("rm.yaml"),
        format!("specs: specs.yaml\ndatabase: sqlite://rm.db\ninterval: 200ms\n{rm_extra}"),
    )
    .unwrap();
    std::fs::write(
        dir.join("jr.yaml"),
        format!("auth:\n  tokens: tokens\ntoken: {service}\n"),
    )
    .unwrap();
}

/// `spindle server` in `dir` (which holds [`SPECS`]) with this config file after
/// `specs:` and `database:`, listening on `listen`.
fn server_with(dir: &Path, config: &str, listen: &str) -> Service {
    std::fs::write(
        dir.join("server.yaml"),
        format!("specs: specs.yaml\ndatabase: sqlite://s.db\n{config}"),
    )
    .unwrap();
    Service::start(
        dir,
        &["server", "--config", "server.yaml", "--listen", listen],
    )
}

/// GET `url` as JSON, with a bearer token if given.
async fn get_json(http: &reqwest::Client, url: &str, token: Option<&str>) -> Value {
    let mut request = http.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap().json().await.unwrap()
}

#[test]
fn token_create_refuses_names_that_would_break_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_, stderr, code) = run(spindle(dir.path()).args(["token", "create", "--user", "a b"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("expected a name without spaces or commas"),
        "{stderr}"
    );
    let (_, stderr, code) =
        run(spindle(dir.path()).args(["token", "create", "--user", "ann", "--role", "x,y"]));
    assert_eq!(code, 2, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_tokens_lets_in_only_whom_they_name() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (dir, tokens) = folder_with_tokens(&[("ann", &["deployer"]), ("bob", &["viewer"])]);
    let (ann, bob) = (tokens[0].clone(), tokens[1].clone());
    let server = server_with(dir.path(), "auth:\n  tokens: tokens\n", "127.0.0.1:0");
    let cli = |token: Option<&str>, args: &[&str]| {
        let mut command = spindle(dir.path());
        command
            .env("SPINDLE_ADDR", &server.url)
            .env_remove("SPINDLE_TOKEN")
            .args(args);
        if let Some(token) = token {
            command.env("SPINDLE_TOKEN", token);
        }
        run(&mut command)
    };
    // No token: 401, and it says how to authenticate.
    let (_, stderr, code) = cli(None, &["start", "deploy", "host=db1", "--yes"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("authentication required"), "{stderr}");
    // A role the ACL does not name: 403 with Spin Cycle's words.
    let (_, stderr, code) = cli(Some(&bob), &["start", "deploy", "host=db1", "--yes"]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("denied: no caller role matches deploy ACL: caller has [viewer], deploy requires one of [deployer]"),
        "{stderr}"
    );
    // The deployer starts it; the request is ann's.
    let (stdout, stderr, code) = cli(Some(&ann), &["start", "deploy", "host=db1", "--yes"]);
    assert_eq!(code, 0, "{stderr}");
    let id = stdout
        .split_whitespace()
        .last()
        .unwrap()
        .trim_end_matches('.')
        .to_owned();
    let http = reqwest::Client::new();
    let read = |token: Option<String>| {
        let mut request = http.get(format!("{}/api/v1/requests/{id}", server.url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let mut request = Value::Null;
    crate::eventually("COMPLETE", Duration::from_secs(20), async || {
        request = read(Some(bob.clone())).await.unwrap().json().await.unwrap();
        request["state"] == 3
    })
    .await;
    assert_eq!(request["user"], "ann");
    // Only one request exists: the denied starts left nothing.
    let all = get_json(
        &http,
        &format!("{}/api/v1/requests", server.url),
        Some(&ann),
    )
    .await;
    assert_eq!(all.as_array().unwrap().len(), 1, "{all}");
    let response = read(None).await.unwrap();
    assert_eq!(response.status(), 401);
    let response = read(Some("spindle_forged".to_owned())).await.unwrap();
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["message"],
        "the token is not valid (unknown or revoked)"
    );
    // Health and the UI's pages need nothing; the UI's data does.
    assert_eq!(
        http.get(format!("{}/healthz", server.url))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        http.get(format!("{}/", server.url))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let states = format!("{}/ui/api/requests/{id}/states", server.url);
    assert_eq!(http.get(&states).send().await.unwrap().status(), 401);
    assert_eq!(
        http.get(&states)
            .bearer_auth(&bob)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // The token never appears in the server's log.
    assert!(!server.stderr().contains(&ann), "{}", server.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_manager_and_job_runners_authenticate_to_each_other() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (dir, tokens) = folder_with_tokens(&[
        ("ann", &["deployer"]),
        ("spindle-services", &["spindle"]),
        ("prometheus", &["metrics"]),
    ]);
    let (ann, service, prometheus) = (tokens[0].clone(), tokens[1].clone(), tokens[2].clone());
    // The Job Runner accepts only the services' token, and presents it.
    write_service_configs(dir.path(), "auth:\n  tokens: tokens\n", &service);
    let rm = Service::start_env(
        dir.path(),
        &[
            "rm",
            "--config",
            "rm.yaml",
            "--listen",
            "127.0.0.1:0",
            "--lease",
            "2s",
        ],
        &[("SPINDLE_TOKEN", service.as_str())],
    );
    // A runner without credentials cannot register.
    let stranger = Service::start_env(
        dir.path(),
        &[
            "jr",
            "--listen",
            "127.0.0.1:0",
            "--rm-url",
            &rm.url,
            "--lease",
            "2s",
        ],
        &[("RUST_LOG", "warn")],
    );
    let http = reqwest::Client::new();
    let runners_url = format!("{}/api/v1/job-runners", rm.url);
    let runners = async || get_json(&http, &runners_url, Some(&ann)).await;
    crate::eventually(
        "the stranger told no",
        Duration::from_secs(20),
        async || stranger.stderr().contains("authentication required"),
    )
    .await;
    assert_eq!(runners().await, json!([]), "nothing registered");
    let jr = Service::start(
        dir.path(),
        &[
            "jr",
            "--config",
            "jr.yaml",
            "--listen",
            "127.0.0.1:0",
            "--rm-url",
            &rm.url,
            "--lease",
            "2s",
        ],
    );
    crate::eventually(
        "the runner registered",
        Duration::from_secs(20),
        async || runners().await.as_array().is_some_and(|r| r.len() == 1),
    )
    .await;
    let created: Value = http
        .post(format!("{}/api/v1/requests", rm.url))
        .bearer_auth(&ann)
        .json(&json!({"type": "deploy", "args": {"host": "db1"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    crate::eventually("COMPLETE", Duration::from_secs(30), async || {
        let url = format!("{}/api/v1/requests/{id}", rm.url);
        get_json(&http, &url, Some(&ann)).await["state"] == 3
    })
    .await;
    // The runner refuses callers that are not services: ann may not hand it a chain.
    let response = http
        .get(format!("{}/api/v1/status/running", jr.url))
        .bearer_auth(&ann)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let response = http
        .get(format!("{}/api/v1/status/running", jr.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let response = http
        .get(format!("{}/api/v1/status/running", jr.url))
        .bearer_auth(&service)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // Issue #33: both services' metrics and readiness follow auth: a monitor's token
    // (the metrics role) gets them, an anonymous scrape is a 401; the monitor can do
    // nothing else.
    for url in [&rm.url, &jr.url] {
        for path in ["/metrics", "/readyz"] {
            let status = async |token: Option<&str>| {
                let mut call = http.get(format!("{url}{path}"));
                if let Some(token) = token {
                    call = call.bearer_auth(token);
                }
                call.send().await.unwrap().status().as_u16()
            };
            assert_eq!(status(None).await, 401, "{url}{path}");
            assert_eq!(status(Some(&prometheus)).await, 200, "{url}{path}");
        }
    }
    let response = http
        .get(format!("{}/api/v1/status/running", jr.url))
        .bearer_auth(&prometheus)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403, "a monitor hands no chains");
}

/// Issue #35: a Request Manager that cannot authenticate to its Job Runner (the runner
/// has `auth:`, the manager no token) is a misconfiguration: requests are created (201,
/// not 500) and stay PENDING with the runner's refusal as why they wait, shown by
/// `spindle status`, and the refusal is logged once, not per request or round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_its_runner_refuses_leaves_requests_pending_and_says_why() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (dir, tokens) = folder_with_tokens(&[("spindle-services", &["spindle"])]);
    let service = tokens[0].clone();
    write_service_configs(dir.path(), "", &service);
    let rm = Service::start(
        dir.path(),
        &["rm", "--config", "rm.yaml", "--listen", "127.0.0.1:0"],
    );
    let _jr = Service::start(
        dir.path(),
        &[
            "jr",
            "--config",
            "jr.yaml",
            "--listen",
            "127.0.0.1:0",
            "--rm-url",
            &rm.url,
        ],
    );
    let http = reqwest::Client::new();
    let runners_url = format!("{}/api/v1/job-runners", rm.url);
    crate::eventually(
        "the runner registered",
        Duration::from_secs(20),
        async || {
            get_json(&http, &runners_url, None)
                .await
                .as_array()
                .is_some_and(|r| r.len() == 1)
        },
    )
    .await;
    let mut ids = Vec::new();
    for host in ["db1", "db2"] {
        let response = http
            .post(format!("{}/api/v1/requests", rm.url))
            .json(&json!({"type": "deploy", "args": {"host": host}}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201, "created, not a 500");
        let created: Value = response.json().await.unwrap();
        ids.push(created["id"].as_str().unwrap().to_owned());
    }
    let why = "refused this Request Manager's credentials";
    for id in &ids {
        let url = format!("{}/api/v1/requests/{id}", rm.url);
        crate::eventually("why it waits", Duration::from_secs(20), async || {
            let request = get_json(&http, &url, None).await;
            request["state"] == 1 && request["error"].as_str().is_some_and(|e| e.contains(why))
        })
        .await;
    }
    let (stdout, stderr, code) =
        run(spindle(dir.path()).args(["status", &ids[0], "--addr", &rm.url]));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("state: PENDING") && stdout.contains(why) && stdout.contains("HTTP 401"),
        "{stdout}"
    );
    let logged = rm
        .stderr()
        .matches("a job runner refused this Request Manager's credentials")
        .count();
    assert_eq!(logged, 1, "logged once for the runner:\n{}", rm.stderr());
}

/// A test CA and the certificates it issues, written as PEM files in `dir`.
struct Pki {
    dir: std::path::PathBuf,
    ca: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Pki {
    fn new(dir: &Path, name: &str) -> Pki {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("Spindle test CA {name}"));
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.join(format!("{name}-ca.pem")), cert.pem()).unwrap();
        Pki {
            dir: dir.to_owned(),
            ca: rcgen::Issuer::new(params, key),
        }
    }

    /// A certificate for 127.0.0.1 and localhost (server and client use), with this CN
    /// and OU; writes `<file>.pem` and `<file>-key.pem`.
    fn issue(&self, file: &str, cn: &str, ou: Option<&str>) {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress("127.0.0.1".parse().unwrap()));
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        if let Some(ou) = ou {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationalUnitName, ou);
        }
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        std::fs::write(self.dir.join(format!("{file}.pem")), cert.pem()).unwrap();
        std::fs::write(
            self.dir.join(format!("{file}-key.pem")),
            key.serialize_pem(),
        )
        .unwrap();
    }
}

fn https_client(dir: &Path, ca: &str, identity: Option<&str>) -> reqwest::Client {
    let pem = std::fs::read(dir.join(format!("{ca}-ca.pem"))).unwrap();
    let mut builder = reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(&pem).unwrap())
        .timeout(Duration::from_secs(10));
    if let Some(name) = identity {
        let mut pem = std::fs::read(dir.join(format!("{name}.pem"))).unwrap();
        pem.extend(std::fs::read(dir.join(format!("{name}-key.pem"))).unwrap());
        builder = builder.identity(reqwest::Identity::from_pem(&pem).unwrap());
    }
    builder.build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_reaches_a_server_over_tls_and_a_new_certificate_is_served_without_a_restart() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (dir, tokens) = folder_with_tokens(&[("ann", &["deployer"])]);
    let ann = tokens[0].clone();
    let first = Pki::new(dir.path(), "first");
    first.issue("server", "spindle", None);
    let server = server_with(
        dir.path(),
        "auth:\n  tokens: tokens\ntls:\n  cert: server.pem\n  key: server-key.pem\n",
        "127.0.0.1:0",
    );
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );
    let cli = |ca: Option<&str>, args: &[&str]| {
        let mut command = spindle(dir.path());
        command
            .env("SPINDLE_ADDR", &server.url)
            .env("SPINDLE_TOKEN", &ann)
            .args(args);
        if let Some(ca) = ca {
            command.env("SPINDLE_CA_CERT", dir.path().join(format!("{ca}-ca.pem")));
        }
        run(&mut command)
    };
    // Without the CA the server is not trusted.
    let (_, stderr, code) = cli(None, &["start", "deploy", "host=db1", "--yes"]);
    assert_ne!(code, 0, "{stderr}");
    let (stdout, stderr, code) = cli(Some("first"), &["start", "deploy", "host=db1", "--yes"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("OK, started deploy request"), "{stdout}");
    let id = stdout.split_whitespace().last().unwrap().to_owned();
    // A plain-HTTP client gets no answer from an HTTPS port.
    let plain = reqwest::Client::new();
    assert!(
        plain
            .get(server.url.replace("https://", "http://") + "/healthz")
            .send()
            .await
            .is_err()
    );
    // The certificate files are replaced by one from another CA: it is served soon,
    // without a restart.
    let second = Pki::new(dir.path(), "second");
    second.issue("server-next", "spindle", None);
    let trusts_second = https_client(dir.path(), "second", None);
    assert!(
        trusts_second
            .get(format!("{}/healthz", server.url))
            .send()
            .await
            .is_err()
    );
    std::fs::rename(
        dir.path().join("server-next-key.pem"),
        dir.path().join("server-key.pem"),
    )
    .unwrap();
    std::fs::rename(
        dir.path().join("server-next.pem"),
        dir.path().join("server.pem"),
    )
    .unwrap();
    crate::eventually(
        "the new certificate served",
        Duration::from_secs(20),
        async || {
            trusts_second
                .get(format!("{}/healthz", server.url))
                .send()
                .await
                .is_ok()
        },
    )
    .await;
    let (stdout, stderr, code) = cli(Some("second"), &["status", &id]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("state: COMPLETE") && stdout.contains("caller: ann"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_managers_and_job_runners_require_each_others_client_certificates() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("specs.yaml"), SPECS).unwrap();
    let pki = Pki::new(dir.path(), "corp");
    pki.issue("rm", "rm-1", Some("spindle"));
    pki.issue("jr", "jr-1", Some("spindle"));
    pki.issue("ann", "ann", Some("deployer"));
    pki.issue("eve", "eve", Some("viewer"));
    let tls = |name: &str| {
        format!(
            "tls:\n  cert: {name}.pem\n  key: {name}-key.pem\n  client_ca: corp-ca.pem\nclient:\n  ca: corp-ca.pem\n  cert: {name}.pem\n  key: {name}-key.pem\nauth:\n  client_certificates:\n    roles: ou\n"
        )
    };
    std::fs::write(
        dir.path().join("rm.yaml"),
        format!(
            "specs: specs.yaml\ndatabase: sqlite://rm.db\ninterval: 200ms\n{}",
            tls("rm")
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("jr.yaml"), tls("jr")).unwrap();
    let rm = Service::start(
        dir.path(),
        &[
            "rm",
            "--config",
            "rm.yaml",
            "--listen",
            "127.0.0.1:0",
            "--lease",
            "2s",
        ],
    );
    assert!(rm.url.starts_with("https://"), "{}", rm.url);
    let _jr = Service::start(
        dir.path(),
        &[
            "jr",
            "--config",
            "jr.yaml",
            "--listen",
            "127.0.0.1:0",
            "--rm-url",
            &rm.url,
            "--lease",
            "2s",
        ],
    );
    let ann = https_client(dir.path(), "corp", Some("ann"));
    crate::eventually(
        "the runner registered over mTLS",
        Duration::from_secs(20),
        async || {
            let runners: Value = ann
                .get(format!("{}/api/v1/job-runners", rm.url))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            runners.as_array().is_some_and(|r| r.len() == 1)
        },
    )
    .await;
    let created: Value = ann
        .post(format!("{}/api/v1/requests", rm.url))
        .json(&json!({"type": "deploy", "args": {"host": "db1"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    assert_eq!(created["user"], "ann", "the certificate's CN");
    crate::eventually(
        "COMPLETE over mTLS both ways",
        Duration::from_secs(30),
        async || {
            let request: Value = ann
                .get(format!("{}/api/v1/requests/{id}", rm.url))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            request["state"] == 3
        },
    )
    .await;
    // A certificate whose OU the ACL does not name: 403.
    let eve = https_client(dir.path(), "corp", Some("eve"));
    let response = eve
        .post(format!("{}/api/v1/requests", rm.url))
        .json(&json!({"type": "deploy", "args": {"host": "db1"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    // No client certificate: the handshake itself is refused.
    let anonymous = https_client(dir.path(), "corp", None);
    assert!(
        anonymous
            .get(format!("{}/healthz", rm.url))
            .send()
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_exhaust_a_server() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (dir, _) = folder_with_tokens(&[]);
    let server = server_with(
        dir.path(),
        "limits:\n  body_bytes: 100000\n  header_bytes: 16384\n  header_timeout: 1s\n  body_timeout: 1s\n",
        "0.0.0.0:0",
    );
    // Without authentication on an address beyond this machine, it says so at start.
    crate::eventually("the warning", Duration::from_secs(10), async || {
        server.stderr().contains("authentication is off")
    })
    .await;
    let url = server.url.replace("0.0.0.0", "127.0.0.1");
    let http = reqwest::Client::new();
    // A body past the limit: 413, and nothing stored.
    let big = json!({"type": "deploy", "args": {"host": "x".repeat(200_000)}});
    let response = http
        .post(format!("{url}/api/v1/requests"))
        .json(&big)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["message"].as_str().unwrap().contains("length limit"),
        "{body}"
    );
    // Headers past the limit: refused (431), the connection not kept. The server closes
    // it with the rest of the headers unread, so the kernel may reset it before the
    // client has read the 431: a reset is the same refusal.
    match http
        .get(format!("{url}/healthz"))
        .header("x-filler", "y".repeat(20_000))
        .send()
        .await
    {
        Ok(response) => assert_eq!(response.status(), 431),
        Err(err) => assert!(
            err.is_request() && !err.is_timeout() && !err.is_connect(),
            "{err:?}"
        ),
    }
    // A client that never finishes its headers is cut off after header_timeout.
    let addr = url.trim_start_matches("http://");
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the connection was not closed");
    assert!(started.elapsed() < Duration::from_secs(9));
    // One whose body never arrives, likewise.
    let mut stalled = tokio::net::TcpStream::connect(addr).await.unwrap();
    stalled
        .write_all(b"POST /api/v1/requests HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{\"type\"")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let read =
        tokio::time::timeout(Duration::from_secs(10), stalled.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the stalled body was waited for forever");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains("application/json") && answer.contains("not received within"),
        "{answer}"
    );
    // The server still serves everyone else.
    let response = http.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(response.status(), 200);
}
