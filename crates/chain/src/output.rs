//! Live job output: every try's [`job::Output`] writes into the chain's [`Hub`], and the
//! delivery task's flusher ([`flush`]) sends what has gathered to the Reporter in
//! batches, every [`FLUSH_INTERVAL`] or sooner when much has gathered.
//!
//! Memory stays bounded: per try and stream at most [`PENDING_CAP`] bytes wait to be
//! sent; past that the oldest waiting bytes are dropped, and the next chunk's offset
//! shows the cut. So a Request Manager that is down, or a job that prints faster than the
//! output can be sent, never slows the job nor grows the runner.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proto::{OutputChunk, Stream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::reporter::{Reporter, RetryPolicy, with_retries};
use crate::state::{JobIdx, PerJob};

/// How often gathered output is sent.
pub(crate) const FLUSH_INTERVAL: Duration = Duration::from_millis(200);
/// Gathered bytes (all streams) that make the flusher send at once.
const FLUSH_BYTES: usize = 256 * 1024;
/// Bytes of one try's stream waiting to be sent, at most.
pub(crate) const PENDING_CAP: usize = 256 * 1024;

/// Where one stream of one try stands.
#[derive(Debug, Default)]
struct Pending {
    /// The stream offset of `bytes[0]`.
    offset: u64,
    bytes: Vec<u8>,
    /// Ended: once sent, the entry goes.
    closed: bool,
    /// When its waiting bytes began to gather (the hub's write count then): chunks are
    /// sent in that order, so that a job's last line goes before the output of a job
    /// that started after it (`log --follow` prints in the order things happened).
    since: u64,
}

/// (job, try, stream).
type Key = (JobIdx, u32, Stream);

/// A chain's gathered output, by job, try and stream.
#[derive(Debug, Default)]
pub(crate) struct Hub {
    /// The chain's jobs, for their ids.
    jobs: PerJob<Arc<crate::incoming::RunJob>>,
    pending: Mutex<HashMap<Key, Pending>>,
    /// Bytes gathered and not yet taken.
    gathered: std::sync::atomic::AtomicUsize,
    /// Whether any try wrote anything (until then, ending a try costs no lock).
    written: std::sync::atomic::AtomicBool,
    /// Writes so far (under `pending`'s lock), which orders the chunks.
    writes: std::sync::atomic::AtomicU64,
    /// Output gathered when none was: the flusher, idle, waits for this (no timer).
    arrived: Notify,
    /// Much gathered: the flusher sends before its interval ends.
    wake: Notify,
    /// The flusher's rounds, for a test that it sleeps while nothing is gathered.
    #[cfg(test)]
    rounds: std::sync::atomic::AtomicU64,
    /// The request's secret args: their values never leave in output (issue #33).
    secrets: job::Secrets,
}

impl Hub {
    pub(crate) fn new(jobs: PerJob<Arc<crate::incoming::RunJob>>, secrets: job::Secrets) -> Hub {
        Hub {
            jobs,
            secrets,
            ..Hub::default()
        }
    }

    pub(crate) fn secrets(&self) -> job::Secrets {
        self.secrets.clone()
    }

    /// `text` with the secret args' values shown as `****`.
    pub(crate) fn mask(&self, text: String) -> String {
        if self.secrets.is_empty() {
            text
        } else {
            self.secrets.mask(&text)
        }
    }

    /// The live output of one try of job `idx`: the hub itself, with a tag naming the
    /// try, so that it costs no allocation.
    pub(crate) fn output(self: &Arc<Hub>, idx: JobIdx, try_no: u32) -> job::Output {
        let tag = (u64::from(idx.raw()) << 32) | u64::from(try_no);
        job::Output::new(Arc::clone(self) as Arc<dyn job::OutputSink>, tag)
    }

    fn write(&self, key: Key, bytes: &[u8]) {
        self.written
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let write = self
            .writes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let entry = pending.entry(key).or_default();
        if entry.bytes.is_empty() {
            entry.since = write;
        }
        entry.bytes.extend_from_slice(bytes);
        let mut added = bytes.len();
        if entry.bytes.len() > PENDING_CAP {
            let dropped = entry.bytes.len() - PENDING_CAP;
            entry.bytes.drain(..dropped);
            entry.offset += dropped as u64;
            added = added.saturating_sub(dropped);
        }
        drop(pending);
        let before = self
            .gathered
            .fetch_add(added, std::sync::atomic::Ordering::Relaxed);
        if before == 0 && added > 0 {
            self.arrived.notify_one();
        }
        if before + added >= FLUSH_BYTES {
            self.wake.notify_one();
        }
    }

    /// The try's output has ended: what is left of it is sent in full (no character is
    /// held back for its missing end).
    pub(crate) fn close(&self, idx: JobIdx, try_no: u32) {
        if !self.written.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        for stream in [Stream::Stdout, Stream::Stderr] {
            if let Some(entry) = pending.get_mut(&(idx, try_no, stream)) {
                entry.closed = true;
            }
        }
    }

    /// Takes what can be sent: each stream's waiting bytes up to the last whole UTF-8
    /// character (the rest waits for its end, unless the stream is closed).
    fn take(&self, request_id: &str) -> Vec<OutputChunk> {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let mut chunks: Vec<(u64, OutputChunk)> = Vec::new();
        let jobs = &self.jobs;
        pending.retain(|(idx, try_no, stream), entry| {
            let cut = if entry.closed {
                entry.bytes.len()
            } else {
                whole_chars(&entry.bytes)
            };
            if cut > 0 {
                let bytes: Vec<u8> = entry.bytes.drain(..cut).collect();
                chunks.push((
                    entry.since,
                    OutputChunk {
                        seq: 0,
                        request_id: request_id.to_owned(),
                        job_id: jobs.get(*idx).map(|job| job.id.clone()).unwrap_or_default(),
                        r#try: *try_no,
                        stream: *stream,
                        offset: entry.offset,
                        data: String::from_utf8_lossy(&bytes).into_owned(),
                    },
                ));
                entry.offset += cut as u64;
                // What is left (a character's start) gathers from now.
                entry.since = self.writes.load(std::sync::atomic::Ordering::Relaxed);
            }
            !(entry.closed && entry.bytes.is_empty())
        });
        self.gathered.store(
            pending.values().map(|entry| entry.bytes.len()).sum(),
            std::sync::atomic::Ordering::Relaxed,
        );
        chunks.sort_by_key(|(since, _)| *since);
        chunks.into_iter().map(|(_, chunk)| chunk).collect()
    }
}

/// The length of `bytes` without an unfinished UTF-8 character at its end.
fn whole_chars(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        // An error at the very end with no length is a character still being written.
        Err(err) if err.error_len().is_none() => err.valid_up_to(),
        Err(_) => bytes.len(),
    }
}

impl job::OutputSink for Hub {
    fn write(&self, tag: u64, stream: Stream, bytes: &[u8]) {
        let idx = JobIdx::from_raw(u32::try_from(tag >> 32).unwrap_or(u32::MAX));
        let try_no = u32::try_from(tag & u64::from(u32::MAX)).unwrap_or(0);
        // A value cut between two writes is not seen; the try's log entry is masked whole.
        let bytes = self.secrets.mask_bytes(bytes);
        Hub::write(self, (idx, try_no, stream), &bytes);
    }
}

/// Sends gathered output until `done` is cancelled, then sends what is left and returns.
/// A batch the Reporter cannot take is retried as the policy says, meanwhile new output
/// gathers (bounded); a batch given up on is dropped: live output is a convenience, the
/// job log entry holds the try's output in any case.
pub(crate) async fn flush(
    hub: Arc<Hub>,
    reporter: Arc<dyn Reporter>,
    policy: RetryPolicy,
    observer: Option<Arc<dyn crate::Observer>>,
    request_id: String,
    done: CancellationToken,
) {
    loop {
        // Nothing gathered: no timer until output arrives. A runner of 50,000 quiet
        // chains otherwise wakes each one's flusher five times a second, 250,000 wakes
        // a second for nothing. (A write between the check and the wait leaves its
        // notification for the wait.)
        if hub.gathered.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            tokio::select! {
                () = hub.arrived.notified() => {}
                () = done.cancelled() => {}
            }
        }
        let last = done.is_cancelled()
            || tokio::select! {
                () = tokio::time::sleep(FLUSH_INTERVAL) => false,
                () = hub.wake.notified() => false,
                () = done.cancelled() => true,
            };
        #[cfg(test)]
        hub.rounds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let chunks = hub.take(&request_id);
        if !chunks.is_empty() {
            let _ = with_retries(&policy, observer.as_deref(), "job output", || {
                reporter.output(&chunks)
            })
            .await;
        }
        if last {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hub over one job, `j`.
    fn hub() -> Hub {
        Hub::new(
            [Arc::new(crate::incoming::RunJob {
                id: "j".to_owned(),
                ..Default::default()
            })]
            .into_iter()
            .collect(),
            job::Secrets::default(),
        )
    }

    fn key(stream: Stream) -> Key {
        (JobIdx::from_raw(0), 1, stream)
    }

    /// A chain whose jobs print nothing costs its runner no timer: the flusher sleeps
    /// until output arrives, sends it within the interval, and sleeps again.
    #[tokio::test(start_paused = true)]
    async fn an_idle_flusher_waits_for_output_without_rounds() {
        let hub = Arc::new(hub());
        let kept = Arc::new(crate::testing::Kept::default());
        let done = CancellationToken::new();
        let task = tokio::spawn(flush(
            Arc::clone(&hub),
            Arc::clone(&kept) as Arc<dyn Reporter>,
            RetryPolicy::default(),
            None,
            "r1".to_owned(),
            done.clone(),
        ));
        let rounds = || hub.rounds.load(std::sync::atomic::Ordering::Relaxed);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(rounds(), 0, "no round while nothing was written");

        hub.write(key(Stream::Stdout), b"hello\n");
        tokio::time::sleep(FLUSH_INTERVAL * 2).await;
        let sent: Vec<String> = kept
            .output
            .lock()
            .unwrap()
            .iter()
            .map(|chunk| chunk.data.clone())
            .collect();
        assert_eq!(sent, ["hello\n"], "sent within the interval");
        let after_output = rounds();
        assert!(after_output >= 1);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(rounds(), after_output, "asleep again once it was sent");

        done.cancel();
        task.await.unwrap();
    }

    /// Issue #36: a batch is in the order its output began to gather, not by job id: a
    /// job's last line goes before the output of the job that started after it.
    #[test]
    fn a_batch_keeps_the_order_output_was_written_in() {
        let job = |id: &str| {
            Arc::new(crate::incoming::RunJob {
                id: id.to_owned(),
                ..Default::default()
            })
        };
        // `z-dump` sorts after `a-verify` by id.
        let hub = Hub::new(
            [job("z-dump"), job("a-verify")].into_iter().collect(),
            job::Secrets::default(),
        );
        let dump = (JobIdx::from_raw(0), 1, Stream::Stdout);
        let verify = (JobIdx::from_raw(1), 1, Stream::Stdout);
        hub.write(dump, b"part 3 of 3\n");
        hub.close(JobIdx::from_raw(0), 1);
        hub.write(verify, b"verifying\n");
        let chunks = hub.take("r");
        let order: Vec<&str> = chunks.iter().map(|c| c.job_id.as_str()).collect();
        assert_eq!(order, ["z-dump", "a-verify"]);
        // Once sent, what gathers next is ordered from then.
        hub.write(verify, b"verified\n");
        hub.write((JobIdx::from_raw(0), 2, Stream::Stderr), b"retry\n");
        let order: Vec<String> = hub.take("r").into_iter().map(|c| c.job_id).collect();
        assert_eq!(order, ["a-verify", "z-dump"]);
    }

    #[test]
    fn chunks_carry_offsets_and_wait_for_whole_characters() {
        let hub = hub();
        hub.write(key(Stream::Stdout), b"caf\xc3");
        let first = hub.take("r");
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].offset, first[0].data.as_str()), (0, "caf"));
        hub.write(key(Stream::Stdout), b"\xa9!");
        let second = hub.take("r");
        assert_eq!((second[0].offset, second[0].data.as_str()), (3, "é!"));
        assert!(hub.take("r").is_empty());
    }

    #[test]
    fn a_stream_that_cannot_be_sent_keeps_its_newest_bytes_and_shows_the_cut() {
        let hub = hub();
        let line = [b'x'; 1000];
        for _ in 0..1000 {
            hub.write(key(Stream::Stderr), &line);
        }
        let chunks = hub.take("r");
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].data.len(), PENDING_CAP);
        assert_eq!(chunks[0].offset, 1_000_000 - PENDING_CAP as u64);
        assert_eq!(chunks[0].end(), 1_000_000);
    }

    #[test]
    fn a_closed_try_is_sent_in_full_and_forgotten() {
        let hub = hub();
        hub.write(key(Stream::Stdout), b"half \xe2\x82");
        hub.close(JobIdx::from_raw(0), 1);
        let chunks = hub.take("r");
        assert_eq!(chunks[0].data, "half \u{fffd}");
        assert!(hub.pending.lock().unwrap().is_empty());
    }
}
