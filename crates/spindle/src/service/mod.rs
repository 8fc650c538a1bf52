//! `spindle server`, `spindle rm` and `spindle jr`: the services, with their configuration
//! from a YAML file, environment variables and flags (in that order of precedence).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use job::Registry;
use rm::Manager;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::exit::{Exit, eprintln_failure};
use crate::service::lint::load_report;
use crate::service::local::local;

mod config;
pub(crate) mod http_server;
pub(crate) mod import;
pub(crate) mod lint;
pub(crate) mod local;
mod logging;
mod process;
pub(crate) mod programs;
mod specs;
pub(crate) mod supervise;
mod wiring;

use config::*;
pub(crate) use config::{
    JrArgs, RmArgs, ServerArgs, Settings, lease_settings, manager_host, stale_claim,
};
pub(crate) use process::{reap_dead_local_runners, shutdown_signal};
use specs::*;
use wiring::*;
pub(crate) use wiring::{build_auth, set_authenticators};

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
    let settings = settings_and_logs(args, common.config.as_deref(), "127.0.0.1:32308")?;
    crate::service::programs::add(registry, &settings.jobs)?;
    let Some(report) = load_report(&settings.specs, Some(registry))? else {
        eprintln_failure("the specs have errors; not starting");
        return Ok(None);
    };
    warn_if_no_request_types(&report.specs, &settings.specs);
    warn_of_diagnostics(&report);
    let auth = build_auth(&settings, &report.specs, custom_authenticators())?;
    let schedules = schedules_of(&report.specs);
    let triggers = triggers_of(&settings.triggers, &report.specs)?;
    let notify = notify_of(&settings.notify, &report.specs)?;
    let secret_args = rm::secrets::SecretArgs::load(&settings.secrets)?;
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
        let trigger = rm::triggers::Trigger::load(config)?;
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
    Ok(rm::notify::Notify::load(config)?)
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
/// background round, its notifications, the specs kept up to date (SIGHUP, or their
/// files watched), all one task; and its router (the API and the web UI) serving on
/// `listener`, another.
async fn run_manager(
    manager: &Arc<Manager>,
    settings: &Settings,
    sources: Vec<proto::SpecFile>,
    registry: Arc<Registry>,
    listener: TcpListener,
    stop: &CancellationToken,
) -> (Task<()>, Task<anyhow::Result<()>>) {
    let started_with = record_specs(manager, sources).await;
    let specs = keep_specs(
        manager.clone(),
        settings.specs.clone(),
        registry,
        started_with,
        settings.watch_specs,
        stop.clone(),
    );
    let background = tokio::spawn({
        let (manager, stop) = (manager.clone(), stop.clone());
        async move {
            tokio::join!(
                manager.clone().run_background(stop.clone()),
                manager.run_notifications(stop),
                specs
            );
        }
    });
    let router = rm::router(manager.clone()).merge(ui::router(manager.clone()));
    let server = tokio::spawn(serve(listener, router, stop.clone(), settings));
    (background, server)
}

/// A task this process waits for.
type Task<T> = tokio::task::JoinHandle<T>;

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
    let (listener, address) = bind("spindle server", &settings, settings.log_format).await?;
    warn_if_open(&settings, "spindle server");
    let base_url = settings.runner_url(address);
    let telemetry = telemetry(&settings, "spindle-server")?;
    let local = local(
        start.specs,
        registry,
        crate::service::local::LocalSettings {
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
    // What a killed predecessor on this machine ran resumes at once.
    reap_dead_local_runners(&local.manager, &local.runner.instance()).await;
    let stop = CancellationToken::new();
    // An approval that waits here is told to the Request Manager here.
    let told = local.manager.clone();
    let approvals = tokio::spawn(tell_approval_waits(
        local.runner.approval_waits(),
        stop.clone(),
        move |request_id, job_id| {
            let manager = told.clone();
            async move {
                if let Err(err) = manager.approval_waiting(&request_id, &job_id).await {
                    tracing::warn!(%request_id, job_id, error = %err, "recording that an approval waits failed; no notification tells of it");
                }
            }
        },
    ));
    let stop_lease = CancellationToken::new();
    let lease = tokio::spawn(jr::lease::hold(
        local.runner.clone(),
        Arc::new(crate::service::local::ManagerRegistry(
            local.manager.clone(),
        )),
        lease_settings(settings.lease),
        stop_lease.clone(),
    ));
    let (background, mut server) = run_manager(
        &local.manager,
        &settings,
        start.sources,
        reload_registry,
        listener,
        &stop,
    )
    .await;
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
    let _ = approvals.await;
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
    let (listener, address) = bind("spindle rm", &settings, settings.log_format).await?;
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
    let (background, mut server) =
        run_manager(&manager, &settings, sources, registry, listener, &stop).await;
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

/// Tells the Request Manager of an approval job of this runner that begins to wait (its
/// notifications say so), trying a few times.
async fn tell_rm_approval_waits(rm: jr::HttpRmClient, request_id: String, job_id: String) {
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
}

/// Calls `tell` with each (request, job) of `waits` (the approval jobs of a runner that
/// begin to wait), each call a task this one owns, until `stop`; then waits for the calls
/// begun.
async fn tell_approval_waits<F, Fut>(
    waits: Option<tokio::sync::mpsc::UnboundedReceiver<(String, String)>>,
    stop: CancellationToken,
    tell: F,
) where
    F: Fn(String, String) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let Some(mut waits) = waits else { return };
    let mut telling = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            wait = waits.recv() => match wait {
                Some((request_id, job_id)) => {
                    telling.spawn(tell(request_id, job_id));
                }
                None => break,
            },
            Some(_) = telling.join_next(), if !telling.is_empty() => {}
            () = stop.cancelled() => break,
        }
    }
    while telling.join_next().await.is_some() {}
}

/// `spindle jr`: a Job Runner, reporting to a Request Manager over HTTP.
pub(crate) async fn job_runner(args: &JrArgs, mut registry: Registry) -> anyhow::Result<Exit> {
    let settings = settings_and_logs(args, args.common.config.as_deref(), "127.0.0.1:32307")?;
    crate::service::programs::add(&mut registry, &settings.jobs)?;
    let (listener, address) = bind("spindle jr", &settings, settings.log_format).await?;
    let rm = jr::HttpRmClient::new(&settings.rm_urls, service_http(&settings)?);
    let told = rm.clone();
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
    let approvals = tokio::spawn(tell_approval_waits(
        runner.approval_waits(),
        stop.clone(),
        move |request_id, job_id| tell_rm_approval_waits(told.clone(), request_id, job_id),
    ));
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
    let _ = approvals.await;
    server.await??;
    flush_traces(runner.telemetry()).await;
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests;
