//! `spindle server`, `spindle rm` and `spindle jr`: the services, with their configuration
//! from a YAML file, environment variables and flags (in that order of precedence).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use job::Registry;
use rm::Manager;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::exit::{Exit, eprintln_failure};
use crate::lint::load_report;
use crate::local::local;

mod config;
mod logging;
mod process;
mod specs;
mod wiring;

use config::*;
pub(crate) use config::{
    FileConfig, JrArgs, RmArgs, ServerArgs, Settings, lease_settings, manager_host, stale_claim,
};
use logging::*;
pub(crate) use process::{reap_dead_local_runners, shutdown_signal};
use specs::*;
pub(crate) use wiring::build_auth;
use wiring::*;

/// Waits for SIGINT or SIGTERM (`None`); a server that ended before, which only an error
/// does, ends the wait with its result.
async fn until_shutdown(
    server: &mut tokio::task::JoinHandle<anyhow::Result<()>>,
) -> Option<anyhow::Result<()>> {
    tokio::select! {
        () = shutdown_signal() => None,
        ended = server => Some(ended.map_err(anyhow::Error::from).and_then(|res| res)),
    }
}

/// What `spindle server` and `spindle rm` start from: their settings (logging set up by
/// them), the specs, linted, with their files, the authentication and the schedules.
struct ManagerStart {
    settings: Settings,
    specs: spec::Specs,
    sources: Vec<proto::SpecFile>,
    auth: Option<Arc<auth::Auth>>,
    schedules: Vec<spec::schedule::Fires>,
    triggers: Vec<rm::triggers::Trigger>,
    notify: rm::notify::Notify,
    secret_args: rm::secrets::SecretArgs,
}

/// [`ManagerStart`] from a command's arguments; `None` (said) when the specs have errors.
fn manager_start(
    args: &impl serde::Serialize,
    common: &CommonArgs,
    registry: &mut Registry,
) -> anyhow::Result<Option<ManagerStart>> {
    let settings = settings_and_logs(
        args,
        common.config.as_deref(),
        common.log_format,
        "127.0.0.1:32308",
    )?;
    crate::programs::add(registry, &settings.jobs)?;
    let Some(report) = load_report(&settings.specs, Some(registry))? else {
        eprintln_failure("the specs have errors; not starting");
        return Ok(None);
    };
    warn_if_no_request_types(&report.specs, &settings.specs);
    warn_of_diagnostics(&report);
    let auth = build_auth(&settings, &report.specs, crate::custom_authenticators())?;
    let schedules = schedules_of(&report.specs);
    let triggers = triggers_of(&settings.triggers, &report.specs)?;
    let notify = notify_of(&settings.notify, &report.specs)?;
    let secret_args =
        rm::secrets::SecretArgs::load(&settings.secrets).map_err(anyhow::Error::msg)?;
    Ok(Some(ManagerStart {
        settings,
        specs: report.specs,
        sources: report.sources,
        auth,
        schedules,
        triggers,
        notify,
        secret_args,
    }))
}

/// The config's triggers, their secrets read and their request types checked against the
/// specs: an error says which trigger and what was expected.
fn triggers_of(
    configs: &[rm::triggers::TriggerConfig],
    specs: &spec::Specs,
) -> anyhow::Result<Vec<rm::triggers::Trigger>> {
    let mut seen = std::collections::HashSet::new();
    let mut triggers = Vec::new();
    for config in configs {
        let trigger = rm::triggers::Trigger::load(config).map_err(anyhow::Error::msg)?;
        if !seen.insert(trigger.name.clone()) {
            anyhow::bail!(
                "triggers: {} is configured twice; expected each name once",
                trigger.name
            );
        }
        if !specs.requests().iter().any(|r| r.name == trigger.request) {
            let known: Vec<&str> = specs.requests().iter().map(|r| r.name.as_str()).collect();
            anyhow::bail!(
                "triggers: {}: request {:?} is not a request type of the specs; expected one of: {}",
                trigger.name,
                trigger.request,
                known.join(", ")
            );
        }
        triggers.push(trigger);
    }
    Ok(triggers)
}

/// The config's `notify:`, its secrets read and the request types its webhooks name
/// checked against the specs.
fn notify_of(
    config: &rm::notify::NotifyConfig,
    specs: &spec::Specs,
) -> anyhow::Result<rm::notify::Notify> {
    for webhook in &config.webhooks {
        if let Some(unknown) = webhook
            .requests
            .iter()
            .find(|name| !specs.requests().iter().any(|r| r.name == **name))
        {
            let known: Vec<&str> = specs.requests().iter().map(|r| r.name.as_str()).collect();
            anyhow::bail!(
                "notify.webhooks: {}: requests: {unknown:?} is not a request type of the specs; expected some of: {}",
                webhook.name,
                known.join(", ")
            );
        }
    }
    rm::notify::Notify::load(config).map_err(anyhow::Error::msg)
}

/// The client notifications are sent with: no client certificate or token of the
/// services' (the receivers are other systems).
fn webhook_http() -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .build()
        .context("building the notifications' HTTP client")
}

/// Starts a Request Manager's work until `stop`: its specs' version recorded, its
/// background round, the specs kept up to date (SIGHUP, or `watch` their files); its
/// router (the API and the web UI) and the background round's task.
async fn run_manager(
    manager: &Arc<Manager>,
    settings: &Settings,
    sources: Vec<proto::SpecFile>,
    registry: Arc<Registry>,
    watch: bool,
    stop: &CancellationToken,
) -> (tokio::task::JoinHandle<()>, axum::Router) {
    let started_with = record_specs(manager, sources).await;
    // The background round and the notifications' task, observed as one.
    let background = tokio::spawn({
        let (manager, stop) = (manager.clone(), stop.clone());
        async move {
            tokio::join!(
                manager.clone().run_background(stop.clone()),
                manager.run_notifications(stop)
            );
        }
    });
    tokio::spawn(keep_specs(
        manager.clone(),
        settings.specs.clone(),
        registry,
        started_with,
        watch,
        stop.clone(),
    ));
    let router = rm::router(manager.clone()).merge(ui::router(manager.clone()));
    (background, router)
}

/// `spindle server`: Request Manager and Job Runner in one process.
pub(crate) async fn server(args: &ServerArgs, mut registry: Registry) -> anyhow::Result<Exit> {
    let Some(start) = manager_start(args, &args.common, &mut registry)? else {
        return Ok(Exit::Failure);
    };
    let settings = start.settings;
    discover_provider(start.auth.as_ref()).await;
    let reload_registry = Arc::new(registry.clone());
    // The database first: "listening on" means ready to serve.
    let store = store::open(&settings.database).await?;
    let (listener, address) = bind("spindle server", &settings, args.common.log_format).await?;
    warn_if_open(&settings, "spindle server");
    let base_url = settings.runner_url(address);
    let telemetry = telemetry(&settings, "spindle-server")?;
    let local = local(
        start.specs,
        registry,
        crate::local::LocalSettings {
            store,
            base_url: &base_url,
            host: manager_host(address.port()),
            interval: settings.interval,
            suspended_ttl: settings.suspended_ttl,
            lease: settings.lease,
            telemetry: telemetry.clone(),
            auth: start.auth,
            retention: settings.retention,
            max_backlog: settings.max_backlog,
        },
    )
    .await?;
    local.manager.set_schedules(start.schedules);
    local.manager.set_triggers(start.triggers);
    local.manager.set_notify(start.notify, webhook_http()?);
    local.manager.set_secret_args(start.secret_args);
    // An approval that waits here is told to the Request Manager here.
    let told = local.manager.clone();
    job::approval::on_wait(move |request_id, job_id| {
        let (manager, request_id, job_id) =
            (told.clone(), request_id.to_owned(), job_id.to_owned());
        tokio::spawn(async move {
            if let Err(err) = manager.approval_waiting(&request_id, &job_id).await {
                tracing::warn!(%request_id, job_id, error = %err, "recording that an approval waits failed; no notification tells of it");
            }
        });
    });
    // What a killed predecessor on this machine ran resumes at once.
    reap_dead_local_runners(&local.manager, &local.runner.instance()).await;
    let stop = CancellationToken::new();
    let stop_lease = CancellationToken::new();
    let lease = tokio::spawn(jr::lease::hold(
        local.runner.clone(),
        Arc::new(crate::local::ManagerRegistry(local.manager.clone())),
        lease_settings(settings.lease),
        stop_lease.clone(),
    ));
    let (background, router) = run_manager(
        &local.manager,
        &settings,
        start.sources,
        reload_registry,
        args.manager.watch_specs,
        &stop,
    )
    .await;
    let mut server = tokio::spawn(serve(listener, router, stop.clone(), &settings));
    if let Some(ended) = until_shutdown(&mut server).await {
        stop.cancel();
        stop_lease.cancel();
        return ended.map(|()| Exit::Success);
    }
    tracing::info!("shutting down: suspending running chains");
    local.manager.shut_down();
    local.runner.shut_down(settings.shutdown_timeout).await;
    stop_lease.cancel();
    let _ = lease.await;
    stop.cancel();
    let _ = background.await;
    finish_serving(server, settings.shutdown_timeout).await?;
    flush_traces(&telemetry).await;
    Ok(Exit::Success)
}

/// Waits for the HTTP server to finish the requests in flight, at most `timeout`.
async fn finish_serving(
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
    timeout: Duration,
) -> anyhow::Result<()> {
    match tokio::time::timeout(timeout, server).await {
        Ok(ended) => ended?,
        Err(_) => {
            tracing::warn!(
                timeout = %proto::duration::format(timeout),
                "requests still in flight at the shutdown timeout were cut off"
            );
            Ok(())
        }
    }
}

/// `spindle rm`: the Request Manager alone, sending chains to Job Runners over HTTP.
pub(crate) async fn request_manager(args: &RmArgs, mut registry: Registry) -> anyhow::Result<Exit> {
    let Some(ManagerStart {
        settings,
        specs,
        sources,
        auth,
        schedules,
        triggers,
        notify,
        secret_args,
    }) = manager_start(args, &args.common, &mut registry)?
    else {
        return Ok(Exit::Failure);
    };
    discover_provider(auth.as_ref()).await;
    // The database first: "listening on" means ready to serve.
    let store = store::open(&settings.database).await?;
    let (listener, address) = bind("spindle rm", &settings, args.common.log_format).await?;
    warn_if_open(&settings, "spindle rm");
    let registry = Arc::new(registry);
    let grapher = graph::Grapher::new(specs, registry.clone());
    let options = rm::Options {
        interval: settings.interval,
        suspended_ttl: settings.suspended_ttl,
        host: manager_host(address.port()),
        lease: settings.lease,
        jr_url: settings.jr_url.clone(),
        fixed_runners: settings.fixed_runners.clone(),
        stale_claim: stale_claim(settings.lease, settings.interval),
        telemetry: telemetry(&settings, "spindle-rm")?,
        auth,
        retention: settings.retention,
        max_backlog: settings.max_backlog,
    };
    let manager = Arc::new(Manager::new(
        grapher,
        store,
        Arc::new(rm::HttpJrClient::new(service_http(&settings)?)),
        options,
    ));
    manager.set_schedules(schedules);
    manager.set_triggers(triggers);
    manager.set_notify(notify, webhook_http()?);
    manager.set_secret_args(secret_args);
    let stop = CancellationToken::new();
    let (background, router) = run_manager(
        &manager,
        &settings,
        sources,
        registry,
        args.manager.watch_specs,
        &stop,
    )
    .await;
    let mut server = tokio::spawn(serve(listener, router, stop.clone(), &settings));
    if let Some(ended) = until_shutdown(&mut server).await {
        stop.cancel();
        return ended.map(|()| Exit::Success);
    }
    tracing::info!("shutting down: finishing the requests in flight");
    manager.shut_down();
    stop.cancel();
    let _ = background.await;
    finish_serving(server, settings.shutdown_timeout).await?;
    flush_traces(manager.telemetry()).await;
    Ok(Exit::Success)
}

/// Tells the Request Manager of each approval job of this runner that begins to wait
/// (its notifications say so), trying a few times.
fn tell_approvals_waiting(rm: jr::HttpRmClient) {
    job::approval::on_wait(move |request_id, job_id| {
        let (rm, request_id, job_id) = (rm.clone(), request_id.to_owned(), job_id.to_owned());
        tokio::spawn(async move {
            let mut wait = Duration::from_millis(200);
            for attempt in 1..=5 {
                match rm.approval_waiting(&request_id, &job_id).await {
                    Ok(()) => return,
                    Err(err) if attempt == 5 || !err.is_transient() => {
                        tracing::warn!(%request_id, job_id, error = %err.message, "telling the Request Manager that an approval waits failed; no notification tells of it");
                        return;
                    }
                    Err(_) => tokio::time::sleep(wait).await,
                }
                wait *= 2;
            }
        });
    });
}

/// `spindle jr`: a Job Runner, reporting to a Request Manager over HTTP.
pub(crate) async fn job_runner(args: &JrArgs, mut registry: Registry) -> anyhow::Result<Exit> {
    let settings = settings_and_logs(
        args,
        args.common.config.as_deref(),
        args.common.log_format,
        "127.0.0.1:32307",
    )?;
    crate::programs::add(&mut registry, &settings.jobs)?;
    let (listener, address) = bind("spindle jr", &settings, args.common.log_format).await?;
    let rm = jr::HttpRmClient::new(&settings.rm_urls, service_http(&settings)?);
    tell_approvals_waiting(rm.clone());
    let base_url = settings.runner_url(address);
    let runner = jr::Runner::new(
        Arc::new(registry),
        Arc::new(rm.clone()),
        &base_url,
        chain::Options::default(),
        telemetry(&settings, "spindle-jr")?,
    );
    let stop_lease = CancellationToken::new();
    let lease = tokio::spawn(jr::lease::hold(
        runner.clone(),
        Arc::new(rm),
        lease_settings(settings.lease),
        stop_lease.clone(),
    ));
    let stop = CancellationToken::new();
    let router = jr::router(runner.clone(), &proto::version());
    let router = match build_runner_auth(&settings)? {
        Some(auth) => jr::with_auth(router, auth),
        None => router,
    };
    warn_if_open(&settings, "spindle jr");
    let mut server = tokio::spawn(serve(listener, router, stop.clone(), &settings));
    if let Some(ended) = until_shutdown(&mut server).await {
        stop.cancel();
        stop_lease.cancel();
        return ended.map(|()| Exit::Success);
    }
    tracing::info!(
        n_chains = runner.n_chains(),
        "shutting down: suspending running chains"
    );
    runner.shut_down(settings.shutdown_timeout).await;
    stop_lease.cancel();
    let _ = lease.await;
    stop.cancel();
    server.await??;
    flush_traces(runner.telemetry()).await;
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
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
            otlp_endpoint: otlp.map(str::to_owned),
            log_level: level.map(str::to_owned),
            metrics: Some(false),
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
            let args = FileConfig::read(&examples.join(file))
                .unwrap_or_else(|err| panic!("{file}: {err:#}"));
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
}
