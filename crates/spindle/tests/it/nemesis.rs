//! The network between two processes, held by the test (issue #48, point 3): a [`Link`]
//! is a TCP proxy on a port of its own that forwards each connection to its target and
//! can cut the traffic (a partition: connections are accepted and then hear nothing, as
//! when packets are dropped), delay it, heal it, or lose answers (a call reaches its
//! target, its answer never comes back). A link carries calls one way (the caller connects to it),
//! so one-way partitions are links cut on one side only.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What a link does to its traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Forwards every byte both ways.
    Pass,
    /// Forwards every byte both ways, each read held this many milliseconds first (a
    /// slow or congested network).
    Delay(u64),
    /// Nothing gets through, either way: open connections fall silent, new ones are
    /// accepted and hear nothing. Healed ([`Mode::Pass`]), the silent ones are closed.
    Cut,
    /// The next calls that begin with these bytes (`"POST /api/v1/requests "`) reach the
    /// target, but their answers are dropped and the connection closed once the target
    /// has answered; this many of them, then the link passes everything again.
    LoseAnswers(&'static str, u32),
}

/// A TCP proxy the test holds (dropped, it stops accepting).
pub(crate) struct Link {
    /// `127.0.0.1:PORT`, where callers connect.
    pub(crate) addr: String,
    shared: Arc<Shared>,
    accepting: tokio::task::JoinHandle<()>,
}

struct Shared {
    /// `host:port` of the process it forwards to.
    target: Mutex<String>,
    mode: watch::Sender<Mode>,
}

impl Link {
    /// A link to `target` (`host:port`, or a URL `http://host:port`), passing traffic.
    pub(crate) async fn to(target: &str) -> Link {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let shared = Arc::new(Shared {
            target: Mutex::new(host_port(target)),
            mode: watch::channel(Mode::Pass).0,
        });
        let accepting = tokio::spawn(accept(listener, Arc::clone(&shared)));
        Link {
            addr,
            shared,
            accepting,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// New connections go to `target` (a process started again elsewhere).
    pub(crate) fn retarget(&self, target: &str) {
        *self.shared.target.lock().unwrap() = host_port(target);
    }

    pub(crate) fn set(&self, mode: Mode) {
        self.shared.mode.send_replace(mode);
    }

    pub(crate) fn mode(&self) -> Mode {
        *self.shared.mode.borrow()
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

fn host_port(target: &str) -> String {
    let target = target
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    // A database URL: the host and port after its credentials.
    match target.split_once("://") {
        Some((_, rest)) => rest
            .rsplit_once('@')
            .map_or(rest, |(_, host)| host)
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
        None => target,
    }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    while let Ok((inbound, _)) = listener.accept().await {
        let _ = inbound.set_nodelay(true);
        let target = shared.target.lock().unwrap().clone();
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let mut mode = shared.mode.subscribe();
            let cut = *mode.borrow_and_update() == Mode::Cut;
            if cut {
                silent_until_healed(inbound, None, &mut mode).await;
                return;
            }
            let Ok(outbound) = TcpStream::connect(&target).await else {
                return;
            };
            let _ = outbound.set_nodelay(true);
            forward(inbound, outbound, &shared, &mut mode).await;
        });
    }
}

/// Copies both ways until either side closes, or the link is cut; a call the link
/// is told to lose is passed on and its answer dropped.
async fn forward(
    mut inbound: TcpStream,
    mut outbound: TcpStream,
    shared: &Shared,
    mode: &mut watch::Receiver<Mode>,
) {
    let cut = {
        let (mut from_caller, mut to_caller) = inbound.split();
        let (mut from_target, mut to_target) = outbound.split();
        let mut up = vec![0u8; 16 * 1024];
        let mut down = vec![0u8; 16 * 1024];
        let mut losing = false;
        loop {
            tokio::select! {
                read = from_caller.read(&mut up) => {
                    let n = match read { Ok(0) | Err(_) => break false, Ok(n) => n };
                    shared.delay().await;
                    if !losing {
                        losing = shared.lose(&up[..n]);
                    }
                    if to_target.write_all(&up[..n]).await.is_err() {
                        break false;
                    }
                }
                read = from_target.read(&mut down) => {
                    let n = match read { Ok(0) | Err(_) => break false, Ok(n) => n };
                    shared.delay().await;
                    // The call was served; its caller hears nothing of it.
                    if losing {
                        break false;
                    }
                    if to_caller.write_all(&down[..n]).await.is_err() {
                        break false;
                    }
                }
                cut = async { mode.wait_for(|mode| *mode == Mode::Cut).await.is_ok() } => break cut,
            }
        }
    };
    if cut {
        silent_until_healed(inbound, Some(outbound), mode).await;
    }
}

impl Shared {
    /// Waits as long as the link delays traffic now.
    async fn delay(&self) {
        let mode = *self.mode.borrow();
        if let Mode::Delay(ms) = mode {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
    }

    /// Whether the call beginning with `bytes` is one to lose (and counts it).
    fn lose(&self, bytes: &[u8]) -> bool {
        self.mode.send_if_modified(|now| match now {
            Mode::LoseAnswers(call, n) if *n > 0 && bytes.starts_with(call.as_bytes()) => {
                *n -= 1;
                if *n == 0 {
                    *now = Mode::Pass;
                }
                true
            }
            _ => false,
        })
    }
}

/// Holds the connection open and silent while the link is cut; closes it after.
async fn silent_until_healed(
    inbound: TcpStream,
    outbound: Option<TcpStream>,
    mode: &mut watch::Receiver<Mode>,
) {
    let _ = mode.wait_for(|mode| *mode != Mode::Cut).await;
    drop((inbound, outbound));
}
