//! Waiting for a request to end (`GET ...?wait=`): woken by an end stored here, or by
//! the one task that reads the ends of every waited-for request stored elsewhere.

use super::*;

/// Callers waiting for requests to end, by request id.
pub(super) type Waiting = Arc<Mutex<HashMap<String, Waiter>>>;

impl Manager {
    /// [`Manager::get`] once the request has ended, or once `up_to` has passed (then as
    /// it is). Woken when this Request Manager stores the end, or when [`watch_ends`],
    /// whose one query reads the ends of all the waited-for requests due, finds it (an
    /// end stored by another Request Manager): a waiter reads its request when it begins
    /// and when it is woken, not at intervals of its own.
    pub async fn wait_for_end(
        &self,
        request_id: &str,
        with_chain: bool,
        up_to: Duration,
    ) -> Result<Request, Error> {
        let deadline = tokio::time::Instant::now() + up_to.min(MAX_WAIT);
        if up_to.is_zero() {
            let request = self.store.get_request(request_id, false).await?;
            return self.with_chain(request, with_chain).await;
        }
        let notify = Arc::clone(
            &self
                .waiting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(request_id.to_owned())
                .or_insert_with(Waiter::new)
                .notify,
        );
        self.watch_ends();
        let request = loop {
            let woken = notify.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            // Read after enabling the wake-up: an end stored meanwhile is seen either way.
            let request = self.store.get_request(request_id, false).await;
            let now = tokio::time::Instant::now();
            match request {
                Ok(request) if !request.state.is_finished() && now < deadline => {}
                done => break done,
            }
            let _ = tokio::time::timeout(deadline - now, woken).await;
        };
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            // The map's and ours: nobody else waits for it.
            if Arc::strong_count(&notify) <= 2 {
                waiting.remove(request_id);
            }
        }
        self.with_chain(request?, with_chain).await
    }

    /// Starts the task that reads the ends of waited-for requests, unless it runs.
    pub(super) fn watch_ends(&self) {
        if self.watching.swap(true, Ordering::AcqRel) {
            return;
        }
        let (store, waiting, watching) = (
            Arc::clone(&self.store),
            Arc::clone(&self.waiting),
            Arc::clone(&self.watching),
        );
        let task = tokio::spawn(watch_ends(store, waiting, watching));
        *self.watcher.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
    }

    /// How many callers wait for `request_id` to end (for tests and diagnostics).
    pub fn waiting_for(&self, request_id: &str) -> usize {
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(request_id)
            .map_or(0, |waiter| Arc::strong_count(&waiter.notify) - 1)
    }
}

/// The callers waiting for one request to end, and when [`watch_ends`] reads it next:
/// every [`WAIT_POLL`] for [`WAIT_EAGER`], then at doubling intervals up to
/// [`WAIT_RECHECK`], so that a long wait costs one read a second in a query shared with
/// every other waiter's.
#[derive(Debug)]
pub(super) struct Waiter {
    pub(super) notify: Arc<tokio::sync::Notify>,
    since: tokio::time::Instant,
    next_read: tokio::time::Instant,
    every: Duration,
}

impl Waiter {
    pub(super) fn new() -> Waiter {
        let now = tokio::time::Instant::now();
        Waiter {
            notify: Arc::default(),
            since: now,
            next_read: now + WAIT_POLL,
            every: WAIT_POLL,
        }
    }

    /// Whether its request is due for a read at `now`; if it is, when the next is.
    pub(super) fn due(&mut self, now: tokio::time::Instant) -> bool {
        if self.next_read > now {
            return false;
        }
        if now.duration_since(self.since) >= WAIT_EAGER {
            self.every = (self.every * 2).min(WAIT_RECHECK);
        }
        self.next_read = now + self.every;
        true
    }
}

/// While anyone waits, every [`WAIT_POLL`], reads which of the waited-for requests due
/// for a read (see [`Waiter`]) have ended, in one query for all, and wakes their
/// waiters; ends when nobody waits. A failed
/// read is tried again at the next round (the waiters' own deadlines still hold).
pub(super) async fn watch_ends(store: Arc<dyn Store>, waiting: Waiting, watching: Arc<AtomicBool>) {
    loop {
        tokio::time::sleep(WAIT_POLL).await;
        let ids: Vec<String> = {
            let mut waiting = waiting.lock().unwrap_or_else(|p| p.into_inner());
            if waiting.is_empty() {
                // Cleared under the lock: a waiter that registers after this starts a
                // new task.
                watching.store(false, Ordering::Release);
                return;
            }
            let now = tokio::time::Instant::now();
            waiting
                .iter_mut()
                .filter_map(|(id, waiter)| waiter.due(now).then(|| id.clone()))
                .collect()
        };
        if ids.is_empty() {
            continue;
        }
        let Ok(ended) = store.ended_among(&ids).await else {
            continue;
        };
        let waiting = waiting.lock().unwrap_or_else(|p| p.into_inner());
        for id in ended {
            if let Some(waiter) = waiting.get(&id) {
                waiter.notify.notify_waiters();
            }
        }
    }
}

#[cfg(test)]
mod waiter_tests {
    use super::{Duration, WAIT_EAGER, WAIT_POLL, WAIT_RECHECK, Waiter};

    /// Issue #17: a waited-for request is read at every round for its first second (an end
    /// another Request Manager stored is seen within a round), then at doubling intervals
    /// up to one a second.
    #[test]
    pub(super) fn a_waited_for_request_is_read_every_round_for_a_second_then_ever_less_often() {
        let mut waiter = Waiter::new();
        let since = waiter.since;
        let mut reads = Vec::new();
        let mut at = since;
        while at < since + Duration::from_secs(5) {
            at += WAIT_POLL;
            if waiter.due(at) {
                reads.push((at - since).as_millis());
            }
        }
        let rounds = WAIT_EAGER.as_millis() / WAIT_POLL.as_millis();
        let mut expected: Vec<u128> = (1..=rounds).map(|n| n * WAIT_POLL.as_millis()).collect();
        let (mut last, mut every) = (WAIT_EAGER.as_millis(), WAIT_POLL.as_millis());
        while last < 5000 {
            every = (every * 2).min(WAIT_RECHECK.as_millis());
            last += every;
            if last <= 5000 {
                expected.push(last);
            }
        }
        assert_eq!(reads, expected);
        assert_eq!(
            &reads[rounds as usize..],
            &[1050, 1150, 1350, 1750, 2550, 3550, 4550]
        );
    }
}
