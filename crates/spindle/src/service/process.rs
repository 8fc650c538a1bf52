//! The service's process: its shutdown signal, and the local Job Runners that died
//! without ending their registration.

/// Whether process `pid` runs on this machine (Linux: it has a `/proc` entry).
pub(super) fn process_exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Runners registered from this machine whose process is gone (a `spindle server` or
/// `spindle run` killed before): lost now, so that what they ran resumes at once rather
/// than after their lease.
pub(crate) async fn reap_dead_local_runners(manager: &rm::Manager, own_instance: &str) {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let Ok(runners) = manager.job_runners().await else {
        return;
    };
    for runner in runners {
        let gone = runner.state != proto::RunnerState::Stopped
            && runner.instance_id != own_instance
            && runner.host == host
            && runner.pid != 0
            && (runner.pid == std::process::id() || !process_exists(runner.pid));
        if gone
            && (runner.ended_at.is_none() || runner.running_requests > 0)
            && let Err(err) = manager
                .declare_lost(&runner, "its process on this machine is gone")
                .await
        {
            tracing::warn!(instance = runner.instance_id, error = %err.chain(), "recovering a dead runner's requests failed");
        }
    }
}

/// SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM can be watched");
    tokio::select! {
        _ = interrupt => {}
        _ = terminate.recv() => {}
    }
}
