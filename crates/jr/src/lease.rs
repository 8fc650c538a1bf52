//! The runner's registration and lease with the Request Managers.
//!
//! A runner registers as its instance and renews every third of its lease. If it cannot
//! renew for a whole lease (measured from when the last renewal that succeeded was sent),
//! or it is told that its instance was declared lost, it abandons every chain — their
//! requests are recovered elsewhere — and registers again as a new instance. So a runner
//! never advances a request after the Request Managers may have given it to another.
//!
//! Each renewal names the requests whose chains the runner holds, so that a Request
//! Manager recovers a request it believes this runner runs but which the runner no
//! longer has (a chain whose end could not be reported).

use std::sync::Arc;
use std::time::Duration;

use proto::{JobRunner, LeaseRenewal, RunnerRegistration};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::Runner;

/// How soon a renewal that failed is tried again.
const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(250);

/// Why a registration or renewal failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// No Request Manager answered, or it could not store the renewal: try again.
    #[error("request manager unavailable: {0}")]
    Unavailable(String),
    /// The instance was declared lost or deregistered (or a registration was refused):
    /// register again as a new instance.
    #[error("refused: {0}")]
    Ended(String),
    /// The Request Manager speaks an API version this runner cannot work with: it
    /// registers nowhere until one it can work with answers.
    #[error("{0}")]
    Incompatible(String),
}

/// Where a runner registers and renews its lease: the Request Managers over HTTP, or
/// the one in the same process.
#[async_trait::async_trait]
pub trait Registry: Send + Sync + 'static {
    async fn register(&self, registration: &RunnerRegistration)
    -> Result<JobRunner, RegistryError>;
    /// Renews `instance`'s lease, saying which requests' chains it holds now (when
    /// `renewal` is given: see [`names_held`]).
    async fn renew(
        &self,
        instance: &str,
        renewal: Option<&LeaseRenewal>,
    ) -> Result<JobRunner, RegistryError>;
    async fn deregister(&self, instance: &str) -> Result<(), RegistryError>;
}

/// What a runner registers with, beside its instance and URL.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub lease: Duration,
    /// The machine it runs on, and its process id there.
    pub host: String,
    pub pid: u32,
}

/// Chains a renewal may name for each renewal sent (see [`names_held`]).
const HELD_PER_RENEWAL: usize = 1_000;

/// The most renewals in a row of which one names the chains held.
const HELD_EVERY_AT_MOST: usize = 10;

/// Whether renewal `n` (from 0, since the registration) of a runner holding `chains`
/// names them. The Request Manager reads the requests the runner owns against the list
/// at each renewal that names them (a request two such renewals in a row leave out is
/// recovered): a runner of 25,000 chains named them all every few seconds, and the
/// database read as many rows. Up to [`HELD_PER_RENEWAL`] chains every renewal names
/// them; above, one in so many that each renewal carries about that many, one in
/// [`HELD_EVERY_AT_MOST`] at least.
pub(crate) fn names_held(n: usize, chains: usize) -> bool {
    n.is_multiple_of(
        chains
            .div_ceil(HELD_PER_RENEWAL)
            .clamp(1, HELD_EVERY_AT_MOST),
    )
}

/// Logs why a registration failed: at error when the runner cannot work with that
/// Request Manager at all (a misconfiguration), else at warn.
fn registration_failed(instance: &str, err: &RegistryError) {
    if let RegistryError::Incompatible(_) = err {
        tracing::error!(instance, error = %err, "this job runner cannot work with the request manager; not registered, trying again");
    } else {
        tracing::warn!(instance, error = %err, "registering with the request manager failed; trying again");
    }
}

/// Holds `runner`'s lease until `stop` is cancelled, then deregisters it.
// Long because it is the one loop of a lease's life (register, renew every third of
// it, register again as a new instance when it ends or lapses), each answer handled
// where it comes.
pub async fn hold(
    runner: Arc<Runner>,
    registry: Arc<dyn Registry>,
    settings: LeaseSettings,
    stop: CancellationToken,
) {
    let lease = settings.lease;
    let every = lease / 3;
    runner.set_leased();
    'register: loop {
        let instance = runner.instance();
        let registration = RunnerRegistration {
            instance_id: instance.clone(),
            url: runner.base_url().to_owned(),
            host: settings.host.clone(),
            pid: settings.pid,
            lease: proto::duration::format(lease),
            api_version: proto::API_VERSION,
        };
        let sent = Instant::now();
        let registered = tokio::select! {
            () = stop.cancelled() => break 'register,
            res = registry.register(&registration) => res,
        };
        let mut renewed = match registered {
            Ok(_) => {
                tracing::info!(
                    instance,
                    lease = registration.lease,
                    "registered with the request manager"
                );
                runner.set_registered(true);
                sent
            }
            Err(err) => {
                registration_failed(&instance, &err);
                if matches!(err, RegistryError::Ended(_)) {
                    runner.renew_instance();
                }
                tokio::select! {
                    () = stop.cancelled() => break 'register,
                    () = tokio::time::sleep(every) => continue 'register,
                }
            }
        };
        let mut wait = every;
        let mut renewals = 0;
        loop {
            tokio::select! {
                () = stop.cancelled() => break 'register,
                () = tokio::time::sleep(wait) => {}
            }
            wait = every;
            let deadline = renewed + lease;
            let sent = Instant::now();
            // Taken before the renewal is sent: a chain handed over meanwhile is in the
            // next one (a Request Manager recovers only what two renewals in a row leave
            // out).
            let renewal = names_held(renewals, runner.n_chains()).then(|| LeaseRenewal {
                running: runner.held_requests(),
            });
            renewals += 1;
            let res = tokio::select! {
                () = stop.cancelled() => break 'register,
                res = tokio::time::timeout_at(deadline, registry.renew(&instance, renewal.as_ref())) => res,
            };
            if let Some(metrics) = &runner.telemetry().metrics {
                metrics.lease_renewed(matches!(res, Ok(Ok(_))));
            }
            match res {
                Ok(Ok(_)) => renewed = sent,
                Ok(Err(RegistryError::Ended(why))) => {
                    tracing::error!(
                        instance,
                        why,
                        "this job runner's lease ended; its chains are abandoned and it registers again as a new instance"
                    );
                    runner.renew_instance();
                    continue 'register;
                }
                Ok(Err(err)) if Instant::now() < deadline => {
                    tracing::warn!(instance, error = %err, "renewing the lease failed; trying again");
                    // Soon: the lease runs out meanwhile.
                    wait = RETRY_AFTER_FAILURE.min(every);
                }
                Ok(Err(_)) | Err(_) => {
                    tracing::error!(
                        instance,
                        lease = registration.lease,
                        "the lease could not be renewed for a whole lease; the chains are abandoned (their requests are recovered elsewhere) and the runner registers again as a new instance"
                    );
                    runner.renew_instance();
                    continue 'register;
                }
            }
        }
    }
    runner.set_registered(false);
    if let Err(err) = registry.deregister(&runner.instance()).await {
        tracing::warn!(error = %err, "deregistering from the request manager failed");
    }
}
