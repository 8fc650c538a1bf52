//! The services' configuration: flags over the file over the defaults, and what each
//! setting accepts.

use std::net::SocketAddr;

use super::config::*;
use super::logging::LogFormat;
use super::*;

/// Issue #35: flags (and the environment) over the config file over the defaults, in
/// one merge, nested sections too (`--tls-cert` over `tls.cert`, `tls.key` kept).
#[test]
fn flags_are_laid_over_the_config_file_key_by_key() {
    use clap::Parser as _;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        rm: RmArgs,
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rm.yaml");
    std::fs::write(
        &config,
        "listen: 127.0.0.1:1000\ndatabase: postgres://db/spindle\ninterval: 3s\ntls:\n  cert: file.pem\n  key: key.pem\n",
    )
    .unwrap();
    let cli = Cli::try_parse_from([
        "rm",
        "--config",
        config.to_str().unwrap(),
        "--listen",
        "127.0.0.1:2000",
        "--tls-cert",
        "flag.pem",
    ])
    .unwrap();
    let settings = FileConfig::read(&config)
        .unwrap()
        .under(&cli.rm)
        .unwrap()
        .settings("127.0.0.1:1")
        .unwrap();
    assert_eq!(
        settings.listen.to_string(),
        "127.0.0.1:2000",
        "the flag wins"
    );
    assert_eq!(
        settings.database, "postgres://db/spindle",
        "the file's kept"
    );
    assert_eq!(settings.interval, Duration::from_secs(3));
    assert_eq!(
        settings.suspended_ttl,
        Duration::from_secs(3600),
        "the default"
    );
    let tls = settings.tls.unwrap();
    assert_eq!(
        (tls.cert.to_str(), tls.key.to_str()),
        (Some("flag.pem"), Some("key.pem"))
    );
}

/// The observability settings are checked like the others, with what was expected.
#[test]
fn observability_settings_are_checked() {
    let args = |otlp: Option<&str>, level: Option<&str>| FileConfig {
        common: CommonArgs {
            otlp_endpoint: otlp.map(str::to_owned),
            log_level: level.map(str::to_owned),
            metrics: Some(false),
            ..CommonArgs::default()
        },
        ..FileConfig::default()
    };
    let settings = args(Some("http://c:4318"), Some("info,rm=debug"))
        .settings("127.0.0.1:1")
        .unwrap();
    assert!(!settings.metrics);
    assert_eq!(settings.otlp_endpoint.as_deref(), Some("http://c:4318"));
    let err = args(Some("c:4318"), None)
        .settings("127.0.0.1:1")
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("otlp_endpoint: \"c:4318\" is not a URL; expected http://"),
        "{err}"
    );
    for bad in ["loud", "rm=loud"] {
        let err = args(None, Some(bad)).settings("127.0.0.1:1").unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("log_level: {bad:?} is not a level or filter")),
            "{err}"
        );
    }
}

/// A team's own authenticator (`main_with_authenticators`) is asked first; the specs'
/// ACLs and the `auth:` settings apply to whom it names.
#[test]
fn a_teams_own_authenticator_comes_first() {
    #[derive(Debug)]
    struct Header;
    impl auth::Authenticator for Header {
        fn authenticate(
            &self,
            headers: &axum::http::HeaderMap,
            _: &auth::Peer,
        ) -> Result<Option<auth::Caller>, auth::Denied> {
            Ok(headers.get("x-team-user").map(|user| auth::Caller {
                name: user.to_str().unwrap_or_default().to_owned(),
                roles: vec!["deployer".to_owned()],
                via: auth::Via::Custom,
            }))
        }
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tokens"), "").unwrap();
    let config = dir.path().join("rm.yaml");
    std::fs::write(
        &config,
        format!("auth:\n  tokens: {}\n", dir.path().join("tokens").display()),
    )
    .unwrap();
    let settings = FileConfig::read(&config)
        .unwrap()
        .settings("127.0.0.1:1")
        .unwrap();
    let report = spec::lint_str(
        std::path::Path::new("s.yaml"),
        "sequences:\n  deploy:\n    request: true\n    acl:\n      - role: deployer\n        ops: [start]\n    nodes:\n      a:\n        category: job\n        type: noop\n",
    );
    let custom: Vec<Arc<dyn auth::Authenticator>> = vec![Arc::new(Header)];
    let auth = build_auth(&settings, &report.specs, &custom)
        .unwrap()
        .unwrap();
    let mut headers = axum::http::HeaderMap::new();
    headers.insert("x-team-user", "carol".parse().unwrap());
    let caller = auth.authenticate(&headers, &auth::Peer::default()).unwrap();
    assert_eq!(
        (caller.name.as_str(), caller.via),
        ("carol", auth::Via::Custom)
    );
    assert_eq!(auth.authorize(&caller, "start", "deploy"), Ok(()));
    assert!(auth.authorize(&caller, "stop", "deploy").is_err());
    // Without its header, the tokens are asked, and there is none.
    assert!(
        auth.authenticate(&axum::http::HeaderMap::new(), &auth::Peer::default())
            .is_err()
    );
    // An auth: section that can authenticate no one is refused at start.
    std::fs::write(dir.path().join("empty.yaml"), "auth:\n  strict: true\n").unwrap();
    let settings = FileConfig::read(&dir.path().join("empty.yaml"))
        .unwrap()
        .settings("127.0.0.1:1")
        .unwrap();
    let err = build_auth(&settings, &report.specs, &[]).unwrap_err();
    assert!(
        err.to_string().contains("no way to authenticate anyone"),
        "{err}"
    );
}

/// Issue #47: `runners:` names Job Runners by URL with their job types; with
/// `jr_url`, twice, or with empty `types:`, it is refused, saying what was expected.
#[test]
fn fixed_runners_are_read_and_checked() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples");
    let mixed = FileConfig::read(&examples.join("mixed-rm.yaml"))
        .unwrap()
        .settings("127.0.0.1:1")
        .unwrap();
    assert_eq!(mixed.fixed_runners.len(), 2);
    assert_eq!(
        mixed.fixed_runners[0].url,
        "http://sc-jr-1.example.com:32307"
    );
    assert!(
        mixed.fixed_runners[0]
            .types
            .as_ref()
            .unwrap()
            .contains("sleep")
    );
    let dir = tempfile::tempdir().unwrap();
    for (text, expected) in [
        (
            "jr_url: http://a:1\nrunners: [{url: 'http://b:2'}]\n",
            "runners: and jr_url both say where chains go",
        ),
        (
            "runners: [{url: 'http://b:2'}, {url: 'http://b:2/'}]\n",
            "runners[1].url: http://b:2 is listed twice",
        ),
        (
            "runners: [{url: 'http://b:2', types: []}]\n",
            "runners[0].types: empty",
        ),
        (
            "runners: [{url: 'b:2'}]\n",
            "runners[0].url: \"b:2\" is not a URL",
        ),
    ] {
        let path = dir.path().join("c.yaml");
        std::fs::write(&path, text).unwrap();
        let err = FileConfig::read(&path)
            .unwrap()
            .settings("127.0.0.1:1")
            .unwrap_err();
        assert!(format!("{err:#}").contains(expected), "{text}: {err:#}");
    }
}

/// docs/examples' config files are what the services read, every value checked.
#[test]
fn the_documented_example_configs_are_valid() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples");
    for (file, listen) in [
        ("server.yaml", "127.0.0.1:32308"),
        ("rm.yaml", "0.0.0.0:32308"),
        ("jr.yaml", "0.0.0.0:32307"),
    ] {
        let args =
            FileConfig::read(&examples.join(file)).unwrap_or_else(|err| panic!("{file}: {err:#}"));
        let settings = args
            .settings("127.0.0.1:1")
            .unwrap_or_else(|err| panic!("{file}: {err:#}"));
        assert_eq!(settings.listen.to_string(), listen, "{file}");
    }
    let rm = FileConfig::read(&examples.join("rm.yaml"))
        .unwrap()
        .settings("127.0.0.1:1")
        .unwrap();
    assert!(rm.database.starts_with("postgres://"));
    assert_eq!(rm.jr_url.as_deref(), Some("http://jr.example.com:32307"));
    assert!(rm.metrics);
    assert_eq!(
        rm.otlp_endpoint.as_deref(),
        Some("http://otel-collector.example.com:4318")
    );
    assert_eq!(rm.log_level.as_deref(), Some("info"));
    // The secured ones: TLS, authentication, client credentials, limits.
    for file in ["secure-rm.yaml", "secure-jr.yaml"] {
        let settings = FileConfig::read(&examples.join(file))
            .unwrap()
            .settings("127.0.0.1:1")
            .unwrap_or_else(|err| panic!("{file}: {err:#}"));
        assert_eq!(settings.scheme(), "https", "{file}");
        assert!(settings.tls.as_ref().unwrap().client_ca.is_some(), "{file}");
        let auth = settings.auth.as_ref().unwrap();
        assert_eq!(auth.client_certificates.as_ref().unwrap().roles, "ou");
        assert!(settings.credentials.client_cert.is_some(), "{file}");
    }
    let secure = FileConfig::read(&examples.join("secure-rm.yaml"))
        .unwrap()
        .settings("127.0.0.1:1")
        .unwrap();
    let auth = secure.auth.unwrap();
    assert!(auth.strict);
    assert_eq!(auth.admin_roles, ["sre"]);
    assert_eq!(auth.proxy.unwrap().trusted, ["10.0.0.5", "10.0.1.0/24"]);
    assert_eq!(secure.limits.header_timeout, Duration::from_secs(30));
}

/// Issue #36: a runner listening on every address registers a URL another machine
/// can call: its advertised one, else this host's name; never 0.0.0.0 or ::.
#[test]
fn a_runner_registers_a_url_other_machines_can_call() {
    let settings = |yaml: &str| {
        serde_saphyr::from_str::<FileConfig>(yaml)
            .unwrap()
            .settings("127.0.0.1:32307")
    };
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let defaults = settings("{}").unwrap();
    let any: SocketAddr = "0.0.0.0:32307".parse().unwrap();
    assert_eq!(defaults.runner_url(any), format!("http://{host}:32307"));
    let any6: SocketAddr = "[::]:5000".parse().unwrap();
    assert_eq!(defaults.runner_url(any6), format!("http://{host}:5000"));
    let loopback: SocketAddr = "127.0.0.1:4000".parse().unwrap();
    assert_eq!(defaults.runner_url(loopback), "http://127.0.0.1:4000");

    let advertised = settings("advertise_url: https://jr-1.example.com:443\n").unwrap();
    assert_eq!(
        advertised.runner_url(any),
        "https://jr-1.example.com:443",
        "the advertised URL, whatever the listen address"
    );
    for bad in ["http://0.0.0.0:32307", "http://[::]:32307"] {
        let err = settings(&format!("advertise_url: {bad}\n")).unwrap_err();
        assert!(
            err.to_string().contains("no other machine can call"),
            "{bad}: {err:#}"
        );
    }
    let err = settings("advertise_url: jr-1:32307\n").unwrap_err();
    assert!(
        err.to_string().contains("expected http://HOST:PORT"),
        "{err:#}"
    );
}

/// Every setting can be set in the file: the log's format and watching the specs too,
/// each overridden by its flag (`--watch-specs` alone meaning true).
#[test]
fn log_format_and_watch_specs_are_settable_in_the_file_and_by_flag() {
    use clap::Parser as _;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        rm: RmArgs,
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rm.yaml");
    std::fs::write(&config, "log_format: json\nwatch_specs: true\n").unwrap();
    let settings = |flags: &[&str]| {
        let mut argv = vec!["rm", "--config", config.to_str().unwrap()];
        argv.extend_from_slice(flags);
        let cli = Cli::try_parse_from(argv).unwrap();
        FileConfig::read(&config)
            .unwrap()
            .under(&cli.rm)
            .unwrap()
            .settings("127.0.0.1:1")
            .unwrap()
    };
    let from_file = settings(&[]);
    assert_eq!(
        (from_file.log_format, from_file.watch_specs),
        (LogFormat::Json, true)
    );
    let flagged = settings(&["--log-format", "text", "--watch-specs=false"]);
    assert_eq!(
        (flagged.log_format, flagged.watch_specs),
        (LogFormat::Text, false)
    );
    let defaults = FileConfig::default().settings("127.0.0.1:1").unwrap();
    assert_eq!(
        (defaults.log_format, defaults.watch_specs),
        (LogFormat::Text, false)
    );
    std::fs::write(&config, "log_format: xml\n").unwrap();
    let err = FileConfig::read(&config).unwrap_err().to_string();
    assert!(err.contains("log_format") || err.contains("xml"), "{err}");
}

/// Every key is written once, in the file's structs and the flag groups alike: a key the
/// file may not have is named with the keys it may (those of the flag groups too), and a
/// section's unknown key is refused as before.
#[test]
fn an_unknown_key_of_the_config_file_is_named_with_the_keys_it_may_have() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    std::fs::write(&path, "listen: 127.0.0.1:1\nshutdown_timout: 5s\n").unwrap();
    let err = FileConfig::read(&path).unwrap_err().to_string();
    assert!(
        err.contains("unknown key `shutdown_timout`; expected one of:")
            && err.contains("shutdown_timeout")
            && err.contains("jr_url")
            && err.contains("rm_url")
            && err.contains("tls")
            && !err.contains("config,"),
        "{err}"
    );
    std::fs::write(&path, "tls:\n  certificate: a.pem\n").unwrap();
    let err = FileConfig::read(&path).unwrap_err().to_string();
    assert!(err.contains("certificate"), "{err}");
    let keys = FileConfig::keys();
    for key in [
        "listen",
        "database",
        "watch_specs",
        "log_format",
        "runners",
        "secrets",
    ] {
        assert!(keys.iter().any(|k| k == key), "{key} in {keys:?}");
    }
}
