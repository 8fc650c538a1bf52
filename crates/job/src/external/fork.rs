//! A program's fork server (`fork_server: true`, docs/job-protocol.md): one long-lived
//! process of the program per Job Runner, started on the first try, that forks a process
//! for each try. The try's process is what a started program would be — its own process
//! group, the try's pipes as stdin, stdout, stderr and descriptor 3 — so stops, timeouts,
//! output and answers work as for a program started anew; what is saved is the
//! interpreter's start and the jobs' import (Python's 30 ms).
//!
//! The runner and the server talk over a `SOCK_SEQPACKET` socket on the server's
//! descriptor 3, one JSON object a packet: the server says `{"protocol": 1, "ready": true}`
//! once; the runner sends `{"fork": ID}` with the try's four descriptors attached
//! (SCM_RIGHTS); the server answers `{"forked": ID, "pid": PID}` (or `"error"`) and, when
//! the process ends, `{"exited": ID, "status": N}`. A server that dies fails the tries it
//! had (their processes die with it: they guard themselves against it) and the next try
//! starts a new one.

use std::collections::HashMap;
use std::io::IoSlice;
use std::os::fd::{AsRawFd as _, BorrowedFd, OwnedFd};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use command_fds::{CommandFdExt as _, FdMapping};
use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, UnixAddr, recv, sendmsg,
    socketpair,
};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::Program;
use super::process::{PARENT_PID_ENV, env};
use super::wire::{PROTOCOL, PROTOCOL_FD};
use crate::builtin::shell::{Captured, DRAIN_WAIT, drain_thread, exit_code, quote, signal_group};
use nix::sys::signal::Signal;

/// How long a new server may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// What a try waits for: the forked process's pid, then its exit code.
struct Pending {
    forked: Option<oneshot::Sender<Result<u32, String>>>,
    exited: Option<oneshot::Sender<Result<i64, String>>>,
}

/// A running server.
struct Server {
    socket: OwnedFd,
    pid: u32,
    alive: Arc<AtomicBool>,
    pending: Arc<Mutex<HashMap<u64, Pending>>>,
    next: AtomicU64,
}

/// A program's fork server, started when a try first needs it and again after it died.
#[derive(Default)]
pub(crate) struct ForkServer {
    server: tokio::sync::Mutex<Option<Arc<Server>>>,
}

impl std::fmt::Debug for ForkServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ForkServer")
    }
}

/// A try's process, forked by the server.
pub(crate) struct Forked {
    pub(crate) pid: u32,
    /// Its exit code, or why the server cannot say it (the server died).
    pub(crate) exited: oneshot::Receiver<Result<i64, String>>,
}

impl ForkServer {
    /// Forks a process for a try with `fds` (its stdin, stdout, stderr and protocol
    /// descriptor), starting the server first when none runs.
    pub(crate) async fn fork(
        &self,
        program: &Program,
        fds: [BorrowedFd<'_>; 4],
    ) -> Result<Forked, String> {
        let server = {
            let mut slot = self.server.lock().await;
            match slot.as_ref() {
                Some(server) if server.alive.load(Ordering::SeqCst) => server.clone(),
                _ => {
                    let server = start(program).await?;
                    *slot = Some(server.clone());
                    server
                }
            }
        };
        server.fork(fds).await
    }
}

/// A message of the server, read from its socket.
fn message(packet: &[u8]) -> Result<serde_json::Map<String, Value>, String> {
    match serde_json::from_slice(packet) {
        Ok(Value::Object(object)) => Ok(object),
        _ => Err(format!(
            "its fork server wrote {}; expected a JSON object",
            quote(&String::from_utf8_lossy(packet))
        )),
    }
}

/// Starts the program as a fork server and waits until it says it is ready.
async fn start(program: &Program) -> Result<Arc<Server>, String> {
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|err| format!("cannot make its fork server's socket: {err}"))?;
    let mut command = std::process::Command::new(&program.path);
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    command
        .args(&program.args)
        .envs(env("serve"))
        .env(PARENT_PID_ENV, std::process::id().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
        .fd_mappings(vec![FdMapping {
            parent_fd: theirs,
            child_fd: PROTOCOL_FD,
        }])
        .map_err(|err| format!("cannot pass its fork server's socket: {err}"))?;
    let spawned = command.spawn();
    drop(command);
    let mut child = spawned.map_err(|err| format!("cannot start its fork server: {err}"))?;
    let pid = child.id();
    let stderr = Captured::default();
    drain_thread(
        child.stdout.take().map(|p| Box::new(p) as _),
        Captured::default(),
    );
    let stderr_drained = drain_thread(
        child.stderr.take().map(|p| Box::new(p) as _),
        stderr.clone(),
    );
    let alive = Arc::new(AtomicBool::new(true));
    let pending: Arc<Mutex<HashMap<u64, Pending>>> = Arc::default();
    let (ready_tx, ready_rx) = oneshot::channel();
    let reader = ours
        .try_clone()
        .map_err(|err| format!("cannot read its fork server's socket: {err}"))?;
    {
        let (alive, pending) = (alive.clone(), pending.clone());
        std::thread::spawn(move || {
            let why = read(&reader, &pending, ready_tx);
            alive.store(false, Ordering::SeqCst);
            // The server is gone or broke the protocol: it is ended, and its tries
            // with it (they guard themselves against its death).
            signal_group(Some(pid), Signal::SIGKILL);
            let status = child.wait().map_or(-1, exit_code);
            // Its last words, for the error (a child of it may keep the pipe open).
            let deadline = std::time::Instant::now() + DRAIN_WAIT;
            while !stderr_drained.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            let error = format!(
                "its fork server (pid {pid}) {why} (status {status}){}",
                super::process::stderr_note(&stderr.text())
            );
            let waiting: Vec<Pending> = pending
                .lock()
                .map(|mut pending| pending.drain().map(|(_, p)| p).collect())
                .unwrap_or_default();
            for waiter in waiting {
                if let Some(forked) = waiter.forked {
                    let _ = forked.send(Err(error.clone()));
                }
                if let Some(exited) = waiter.exited {
                    let _ = exited.send(Err(error.clone()));
                }
            }
        });
    }
    match tokio::time::timeout(READY_TIMEOUT, ready_rx).await {
        Ok(Ok(Ok(()))) => Ok(Arc::new(Server {
            socket: ours,
            pid,
            alive,
            pending,
            next: AtomicU64::new(1),
        })),
        Ok(Ok(Err(error))) => Err(error),
        Ok(Err(_)) => Err("its fork server ended before it was ready".to_owned()),
        Err(_) => {
            signal_group(Some(pid), Signal::SIGKILL);
            Err(format!(
                "its fork server did not say it was ready within {} and was killed",
                proto::duration::format(READY_TIMEOUT)
            ))
        }
    }
}

/// Reads the server's packets until it ends: the first must say it is ready; then each
/// goes to the try it names. Returns what ended it.
fn read(
    socket: &OwnedFd,
    pending: &Mutex<HashMap<u64, Pending>>,
    ready: oneshot::Sender<Result<(), String>>,
) -> String {
    let mut ready = Some(ready);
    let mut packet = vec![0u8; 64 * 1024];
    loop {
        let n = match recv(socket.as_raw_fd(), &mut packet, MsgFlags::empty()) {
            Ok(0) => return "exited".to_owned(),
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(err) => return format!("could not be read ({err})"),
        };
        let said = match message(&packet[..n]) {
            Ok(said) => said,
            Err(err) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(err.clone()));
                }
                return format!("broke the protocol: {err}");
            }
        };
        if let Some(ready) = ready.take() {
            let spoken = said.get("protocol").and_then(Value::as_u64);
            let verdict = match spoken {
                Some(version)
                    if version == u64::from(PROTOCOL)
                        && said.get("ready") == Some(&Value::Bool(true)) =>
                {
                    Ok(())
                }
                Some(version) if version == u64::from(PROTOCOL) => Err(format!(
                    "its fork server said {}; expected {{\"protocol\": {PROTOCOL}, \"ready\": true}} first",
                    Value::Object(said.clone())
                )),
                None => Err(format!(
                    "its fork server said {}; expected {{\"protocol\": {PROTOCOL}, \"ready\": true}} first",
                    Value::Object(said.clone())
                )),
                Some(other) => Err(format!(
                    "its fork server speaks job protocol {other}; this Spindle speaks protocol {PROTOCOL}"
                )),
            };
            let failed = verdict.clone().err();
            let _ = ready.send(verdict);
            match failed {
                Some(err) => return format!("was refused: {err}"),
                None => continue,
            }
        }
        let Ok(mut pending) = pending.lock() else {
            return "lost its tries (a poisoned lock)".to_owned();
        };
        if let Some(id) = said.get("forked").and_then(Value::as_u64) {
            let forked = pending.get_mut(&id).and_then(|p| p.forked.take());
            let result = match (said.get("pid").and_then(Value::as_u64), said.get("error")) {
                (Some(pid), _) => u32::try_from(pid).map_err(|_| format!("pid {pid}")),
                (None, error) => Err(format!(
                    "its fork server could not fork the try: {}",
                    error.and_then(Value::as_str).unwrap_or("no reason given")
                )),
            };
            if result.is_err() {
                pending.remove(&id);
            }
            if let Some(forked) = forked {
                let _ = forked.send(result);
            }
        } else if let Some(id) = said.get("exited").and_then(Value::as_u64) {
            let status = said.get("status").and_then(Value::as_i64).unwrap_or(-1);
            if let Some(exited) = pending.remove(&id).and_then(|p| p.exited) {
                let _ = exited.send(Ok(status));
            }
        } else {
            return format!(
                "broke the protocol: it said {}; expected \"forked\" or \"exited\"",
                Value::Object(said)
            );
        }
    }
}

impl Server {
    async fn fork(&self, fds: [BorrowedFd<'_>; 4]) -> Result<Forked, String> {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let (forked_tx, forked_rx) = oneshot::channel();
        let (exited_tx, exited_rx) = oneshot::channel();
        self.pending
            .lock()
            .map_err(|_| "its fork server's tries are lost (a poisoned lock)".to_owned())?
            .insert(
                id,
                Pending {
                    forked: Some(forked_tx),
                    exited: Some(exited_tx),
                },
            );
        let packet = json!({ "fork": id }).to_string();
        let raw = fds.map(|fd| fd.as_raw_fd());
        let sent = sendmsg::<UnixAddr>(
            self.socket.as_raw_fd(),
            &[IoSlice::new(packet.as_bytes())],
            &[ControlMessage::ScmRights(&raw)],
            MsgFlags::MSG_NOSIGNAL,
            None,
        );
        if let Err(err) = sent {
            if let Ok(mut pending) = self.pending.lock() {
                pending.remove(&id);
            }
            self.alive.store(false, Ordering::SeqCst);
            return Err(format!(
                "cannot ask its fork server (pid {}) for a process: {err}",
                self.pid
            ));
        }
        let pid = forked_rx
            .await
            .map_err(|_| "its fork server ended".to_owned())??;
        Ok(Forked {
            pid,
            exited: exited_rx,
        })
    }
}
