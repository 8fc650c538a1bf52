//! The specs a Request Manager serves: their schedules and versions, and reloading them
//! (SIGHUP or a change of their files).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use job::Registry;
use rm::Manager;
use tokio_util::sync::CancellationToken;

/// Specs without a request type start, but nothing can be started on them: say so.
pub(super) fn warn_if_no_request_types(specs: &spec::Specs, path: &std::path::Path) {
    if specs.requests().is_empty() {
        tracing::warn!(
            specs = %path.display(),
            "the specs have no request types (no sequence with `request: true`); no request can be started"
        );
    }
}

/// Logs each warning of the specs a Request Manager loads (at start and at every
/// reload): a misspelt field (`retrys:`), which Spin Cycle ignored and so does a
/// loaded spec, must not be lost without a word.
pub(super) fn warn_of_diagnostics(report: &spec::Report) {
    for warning in report
        .diagnostics
        .iter()
        .filter(|d| d.severity == spec::Severity::Warning)
    {
        tracing::warn!(code = warning.code, "spec: {warning}");
    }
}

/// The specs' `schedules:`, ready to fire (the linter accepted them).
pub(super) fn schedules_of(specs: &spec::Specs) -> Vec<spec::schedule::Fires> {
    specs
        .schedules()
        .iter()
        .filter_map(|schedule| match schedule.fires() {
            Ok(fires) => Some(fires),
            Err(err) => {
                tracing::error!(
                    schedule = schedule.name,
                    error = %err,
                    "schedule not started"
                );
                None
            }
        })
        .collect()
}

/// The specs' `acl:` entries, by request type.
pub(super) fn acls_of(specs: &spec::Specs) -> auth::Acls {
    let acls = specs
        .sequences()
        .iter()
        .map(|sequence| {
            let entries = sequence
                .acl
                .iter()
                .map(|acl| auth::AclEntry {
                    role: acl
                        .role
                        .as_ref()
                        .map(|r| r.value.clone())
                        .unwrap_or_default(),
                    admin: acl.admin.as_ref().is_some_and(|a| a.value),
                    ops: acl.ops.iter().map(|op| op.value.clone()).collect(),
                })
                .collect();
            (sequence.name.clone(), entries)
        })
        .collect();
    auth::Acls::new(acls)
}

/// Spec history and reloads: stores the version of the specs the Request Manager
/// started with (`started_with`, their files) before it serves, so that every request
/// records one, then (`keep_specs`) reloads them on SIGHUP (and, with `--watch-specs`, when the files
/// change: their paths, sizes and times are looked at every second, and they are read
/// and linted only when those changed). New specs are linted first; with errors the old
/// ones stay and the errors are logged. Runs until `stop`.
pub(super) async fn record_specs(manager: &Manager, started_with: Vec<proto::SpecFile>) -> String {
    let first = rm::spec_version(started_with);
    if let Err(err) = manager.record_specs(&first).await {
        tracing::warn!(error = %err.chain(), "storing the specs' version failed; requests record none until a reload");
        return String::new();
    }
    first.version
}

pub(super) async fn keep_specs(
    manager: Arc<Manager>,
    path: PathBuf,
    registry: Arc<Registry>,
    started_with: String,
    watch: bool,
    stop: CancellationToken,
) {
    let mut current = started_with;
    let mut rejected = String::new();
    let mut hangups = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(signal) => Some(signal),
        Err(err) => {
            tracing::warn!(error = %err, "cannot listen for SIGHUP; specs are not reloaded on it");
            None
        }
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // What the files looked like when last read (none yet: the first tick reads them, in
    // case they changed since the start): a tick whose files look the same reads and
    // lints nothing.
    let mut seen: Option<spec::Fingerprint> = None;
    loop {
        let asked = tokio::select! {
            () = stop.cancelled() => return,
            Some(()) = async { match &mut hangups { Some(h) => h.recv().await, None => std::future::pending().await } } => true,
            _ = tick.tick(), if watch => false,
        };
        let now = spec::fingerprint(std::slice::from_ref(&path)).ok();
        if !asked && now.is_some() && now == seen {
            continue;
        }
        seen = now;
        let report = match crate::service::lint::lint_report(&path, Some(&registry)) {
            Ok(report) => report,
            Err(err) => {
                tracing::error!(path = %path.display(), error = %err, "reading the specs failed; the loaded ones stay");
                continue;
            }
        };
        let version = rm::spec_version(report.sources.clone());
        if version.version == current {
            if asked {
                tracing::info!(version = current, "specs unchanged");
            }
            continue;
        }
        if report.has_errors() {
            if asked || version.version != rejected {
                let first_error = report
                    .diagnostics
                    .iter()
                    .find(|d| d.severity == spec::Severity::Error)
                    .map(|d| d.to_string())
                    .unwrap_or_default();
                tracing::error!(
                    errors = report.n_errors(),
                    first = first_error,
                    kept = current,
                    "the new specs have errors; the loaded ones stay"
                );
                rejected.clone_from(&version.version);
            }
            continue;
        }
        warn_of_diagnostics(&report);
        let acls = acls_of(&report.specs);
        let schedules = schedules_of(&report.specs);
        let grapher = graph::Grapher::new(report.specs, registry.clone());
        match manager.load_specs(grapher, &version, Some(acls)).await {
            Ok(()) => {
                manager.set_schedules(schedules);
                tracing::info!(
                    old = current,
                    new = version.version,
                    files = version.files.len(),
                    "specs reloaded"
                );
                current = version.version;
            }
            Err(err) => {
                tracing::error!(error = %err.chain(), "storing the new specs failed; the loaded ones stay");
            }
        }
    }
}
