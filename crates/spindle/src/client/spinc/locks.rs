//! `spindle locks`: every lock held or waited for, with its holders and its queue
//! (issue #34): requests, and jobs (named after the time).

use super::*;

pub(crate) async fn locks(args: &ClientArgs) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let locks = text_of!(args, client.locks().await);
    if locks.is_empty() {
        super::eprintln_line(
            "no lock is held or waited for (`locks:` of a request type or a node, and `pools:`, declare them)",
        )?;
        return Ok(Exit::Success);
    }
    // The widest lock, so that the columns line up whatever the keys.
    let label = |lock: &proto::LockStatus| proto::lock_label(&lock.name, &lock.key);
    let width = locks
        .iter()
        .map(|l| label(l).chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    out!(
        "{:<width$} {:>5}  {:<8} {:<20} {:<16} {:<9} SINCE",
        "LOCK",
        "LIMIT",
        "",
        "REQUEST",
        "TYPE",
        "USER"
    );
    let now = Utc::now();
    for lock in &locks {
        let claimants =
            lock.holders
                .iter()
                .map(|c| ("holds", c))
                .chain(lock.waiters.iter().enumerate().map(|(n, c)| {
                    // The first waiter is next.
                    (if n == 0 { "next" } else { "waits" }, c)
                }));
        for (n, (role, claimant)) in claimants.enumerate() {
            let (name, limit) = if n == 0 {
                (label(lock), lock.limit.to_string())
            } else {
                (String::new(), String::new())
            };
            let since = claimant.held_since.unwrap_or(claimant.queued_at);
            // A job's claim (a node's lock, a pool) names the job after the time.
            let job = if claimant.job_id.is_empty() {
                String::new()
            } else {
                format!("  job {}", claimant.job_id)
            };
            out!(
                "{:<width$} {:>5}  {:<8} {:<20} {:<16} {:<9} {} ({} ago){job}",
                name,
                limit,
                role,
                claimant.request_id,
                squeeze(&claimant.request_type, 16),
                squeeze(&claimant.user, 9),
                time(Some(since)),
                runtime(now - since)
            );
        }
    }
    Ok(Exit::Success)
}
