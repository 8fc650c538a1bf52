//! The commands that drive a running server, as Spin Cycle's `spinc` does (cli.md §1):
//! list, help for a request, start (with prompts on a terminal), status, info, log, ps,
//! running, stop, find — plus watch and the stored chain as DOT or JSON.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::time::Duration;

use chrono::{DateTime, Utc};
use proto::{CreateRequest, Request, RequestArgType, RequestFilter, State};
use serde_json::Value;

use crate::client::api::{Client, ClientError};
use crate::exit::Exit;

/// How a command prints what it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Output {
    Human,
    Json,
}

/// Options of every command that talks to a server: flattened into those commands
/// only (and `spindle` itself, whose listing talks to one), so that `lint`, `run` and
/// the servers do not show them. Given before the command too (`spindle --addr X
/// status ID`, as Spin Cycle's `spinc` takes them): a command's own win, then those
/// before it, then the environment (read here, not by clap, so that a variable does not
/// outrank a flag given before the command), then ~/.spindle.yaml.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ClientArgs {
    /// The Request Manager's address (or SPINDLE_ADDR, or `addr:` in ~/.spindle.yaml)
    #[arg(long)]
    addr: Option<String>,
    /// How long to wait for the Request Manager (Go duration; or SPINDLE_TIMEOUT)
    /// [default: 10s]
    #[arg(long)]
    timeout: Option<String>,
    /// Output of commands that read: human text or JSON [default: human]
    #[arg(long, value_enum)]
    output: Option<Output>,
    /// The API token to send (or SPINDLE_TOKEN, or `token:` in ~/.spindle.yaml); prefer
    /// the environment or the file to a flag, which others can see
    #[arg(long)]
    token: Option<String>,
    /// PEM certificates to trust for https:// addresses instead of the system's roots
    /// (or SPINDLE_CA_CERT, or `ca_cert:` in ~/.spindle.yaml)
    #[arg(long)]
    ca_cert: Option<std::path::PathBuf>,
    /// A PEM client certificate to present (mutual TLS), with --client-key (or
    /// SPINDLE_CLIENT_CERT, or `client_cert:` in ~/.spindle.yaml)
    #[arg(long)]
    client_cert: Option<std::path::PathBuf>,
    /// The client certificate's PEM key (or SPINDLE_CLIENT_KEY, or `client_key:` in
    /// ~/.spindle.yaml)
    #[arg(long)]
    client_key: Option<std::path::PathBuf>,
}

/// `~/.spindle.yaml`, the CLI's own settings.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct UserConfig {
    /// The Request Manager's address, used when `--addr` and `SPINDLE_ADDR` are not set.
    addr: Option<String>,
    /// The API token, when `--token` and `SPINDLE_TOKEN` are not set.
    token: Option<String>,
    ca_cert: Option<std::path::PathBuf>,
    client_cert: Option<std::path::PathBuf>,
    client_key: Option<std::path::PathBuf>,
}

impl ClientArgs {
    /// These options, each taken from `before` (those given before the command) where
    /// not given here.
    pub(crate) fn or(self, before: &ClientArgs) -> ClientArgs {
        let before = before.clone();
        ClientArgs {
            addr: self.addr.or(before.addr),
            timeout: self.timeout.or(before.timeout),
            output: self.output.or(before.output),
            token: self.token.or(before.token),
            ca_cert: self.ca_cert.or(before.ca_cert),
            client_cert: self.client_cert.or(before.client_cert),
            client_key: self.client_key.or(before.client_key),
        }
    }

    /// These options, each taken from its environment variable where not given.
    fn or_environment(&self) -> ClientArgs {
        let var = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        let path = |name: &str| var(name).map(std::path::PathBuf::from);
        self.clone().or(&ClientArgs {
            addr: var("SPINDLE_ADDR"),
            timeout: var("SPINDLE_TIMEOUT"),
            output: None,
            token: var("SPINDLE_TOKEN"),
            ca_cert: path("SPINDLE_CA_CERT"),
            client_cert: path("SPINDLE_CLIENT_CERT"),
            client_key: path("SPINDLE_CLIENT_KEY"),
        })
    }

    pub(crate) fn output(&self) -> Output {
        self.output.unwrap_or(Output::Human)
    }

    pub(crate) fn client(&self) -> anyhow::Result<Client> {
        let given = self.or_environment();
        let file = user_config()?;
        let addr = match &given.addr {
            Some(addr) => addr.clone(),
            None => file
                .addr
                .clone()
                .unwrap_or_else(|| "http://127.0.0.1:32308".to_owned()),
        };
        // `host:port` alone means plain HTTP.
        let addr = if addr.contains("://") {
            addr
        } else {
            format!("http://{addr}")
        };
        if !(addr.starts_with("http://") || addr.starts_with("https://")) {
            anyhow::bail!(
                "--addr {addr:?} is not a URL; expected http://HOST:PORT, https://HOST:PORT or HOST:PORT"
            );
        }
        let timeout_text = given.timeout.as_deref().unwrap_or("10s");
        let timeout = proto::duration::parse(timeout_text)
            .map_err(|err| anyhow::anyhow!("--timeout {timeout_text:?}: {err}"))?;
        let credentials = crate::client::credentials::Credentials {
            token: given.token.clone().or(file.token).filter(|t| !t.is_empty()),
            ca: given.ca_cert.clone().or(file.ca_cert),
            client_cert: given.client_cert.clone().or(file.client_cert),
            client_key: given.client_key.clone().or(file.client_key),
        };
        Client::new(&addr, timeout, &credentials)
    }
}

/// ~/.spindle.yaml, if the file exists. A file that cannot be read or has an unknown key
/// is an error (naming the key and the valid ones).
fn user_config() -> anyhow::Result<UserConfig> {
    let Some(home) = std::env::var_os("HOME") else {
        return Ok(UserConfig::default());
    };
    let path = std::path::Path::new(&home).join(".spindle.yaml");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(UserConfig::default());
        }
        Err(err) => anyhow::bail!("cannot read {}: {err}", path.display()),
    };
    serde_saphyr::from_str(&text)
        .map_err(|err| anyhow::anyhow!("config file {}: {err}", path.display()))
}

/// A job's expansion element(s), such as `host=db2` (`name=value,...`); empty for a job
/// outside any `each:`.
pub(crate) fn each_text(each: &proto::JobArgs) -> String {
    graph::structure::each_text(each, ",")
}

/// The first columns of a request in `find`'s and the bulk actions' tables: its id,
/// type, user and state; `None` gives their headers.
fn request_columns(request: Option<(&str, &str, &str, State)>) -> String {
    match request {
        None => format!(
            "{:<20} {:<40} {:<16} {:<9}",
            "ID", "REQUEST", "USER", "STATE"
        ),
        Some((id, request_type, user, state)) => format!(
            "{:<20} {:<40} {:<16} {}",
            squeeze(id, 20),
            squeeze(request_type, 40),
            squeeze(caller(user), 16),
            state_text(state, 9)
        ),
    }
}

/// A caller as a column shows it: a schedule's runs (`schedule:NAME@DUE`) by the
/// schedule's name, since the time they were due is the CREATED column's.
fn caller(user: &str) -> &str {
    match user.strip_prefix("schedule:") {
        Some(rest) if rest.contains('@') => {
            let end = "schedule:".len() + rest.rfind('@').unwrap_or(rest.len());
            &user[..end]
        }
        _ => user,
    }
}

/// A job as people name it: its name, with its expansion element when it has one
/// (`drain [host=web-37]`), which tells the iterations of a fan-out apart.
pub(crate) fn job_title(name: &str, each: &proto::JobArgs) -> String {
    let each = each_text(each);
    if each.is_empty() {
        name.to_owned()
    } else {
        format!("{name} [{each}]")
    }
}

/// A running job's name as people know it: a sequence's begin job that runs (it waits
/// for the sequence's locks) is named by its sequence (`restart`, not
/// `sequence_restart_begin`).
pub(crate) fn running_name(job: &proto::JobStatus) -> &str {
    if graph::names::is_wrapper(&job.name, &job.job_type) {
        graph::names::sequence_name(&job.name)
    } else {
        &job.name
    }
}

/// Running jobs for a progress bar's message: `name [host=db2]: status line, ...` (the
/// expansion element tells the iterations of a fan-out apart).
pub(crate) fn running_line(jobs: &[proto::JobStatus]) -> String {
    let parts: Vec<String> = jobs
        .iter()
        .map(|job| {
            let name = job_title(running_name(job), &job.each);
            if job.status.is_empty() {
                name
            } else {
                format!("{name}: {}", job.status)
            }
        })
        .collect();
    parts.join(", ")
}

/// A failed call's exit, where a 400 (what was given is wrong) is a usage error, said
/// in one line.
pub(crate) fn fail_or_usage(err: &ClientError) -> Exit {
    if let ClientError::Api {
        status: 400,
        message,
    } = err
    {
        crate::exit::eprintln_failure(message);
        return Exit::Usage;
    }
    fail(err)
}

/// Turns a client failure into an exit code after printing one line.
pub(crate) fn fail(err: &ClientError) -> Exit {
    crate::exit::eprintln_failure(&err.to_string());
    err.exit()
}

fn squeeze(text: &str, width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= width {
        return text.to_owned();
    }
    let keep = width.saturating_sub(2);
    let head = keep.div_ceil(2);
    let tail = keep / 2;
    let mut out: String = chars[..head].iter().collect();
    out.push_str("..");
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// Go-style duration rounded to seconds: `5s`, `1h59m59s`.
fn runtime(duration: chrono::Duration) -> String {
    let seconds = duration.num_seconds().max(0);
    proto::duration::format(Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
}

fn time(time: Option<DateTime<Utc>>) -> String {
    time.map_or_else(
        || "N/A".to_owned(),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

/// `name=value`, the value quoted when it holds white space or a quote.
fn arg_pair(name: &str, value: &Value) -> String {
    match value {
        Value::String(text) if text.contains([' ', '\t', '"']) => {
            format!("{name}=\"{}\"", text.replace('"', "\\\""))
        }
        Value::String(text) => format!("{name}={text}"),
        // Lists and maps as their JSON, in single quotes: as a shell takes it back.
        other @ (Value::Array(_) | Value::Object(_)) => {
            format!("{name}='{}'", other.to_string().replace('\'', "'\\''"))
        }
        other => format!("{name}={other}"),
    }
}

/// A state name padded to `width`, coloured on terminals (anstream strips the colour
/// when stdout is not a terminal or NO_COLOR is set).
fn state_text(state: State, width: usize) -> String {
    use anstyle::AnsiColor;
    let color = match state {
        State::Complete => AnsiColor::Green,
        State::Fail | State::Unknown => AnsiColor::Red,
        State::Running => AnsiColor::Cyan,
        State::Stopped | State::Suspended => AnsiColor::Yellow,
        State::Pending | State::Reserved => AnsiColor::BrightBlack,
    };
    let style = anstyle::Style::new().bold().fg_color(Some(color.into()));
    format!("{style}{:<width$}{style:#}", state.name())
}

/// A request's state, with "(paused)" after it while it is paused.
fn request_state(request: &Request) -> String {
    let state = state_text(request.state, 0);
    if request.paused {
        let style = anstyle::Style::new()
            .bold()
            .fg_color(Some(anstyle::AnsiColor::Yellow.into()));
        format!("{state} {style}(paused){style:#}")
    } else {
        state
    }
}

/// `(complete, all)` of the request's own jobs, without the grapher's wrappers (Spin
/// Cycle's counts, wrappers and all, for a request stored before Spindle counted them).
pub(crate) fn job_counts(request: &Request) -> (u64, u64) {
    if request.own_jobs > 0 {
        (request.own_finished_jobs, request.own_jobs)
    } else {
        (request.finished_jobs, request.total_jobs)
    }
}

fn progress(request: &Request) -> String {
    let (complete, all) = job_counts(request);
    if all == 0 {
        return "0%".to_owned();
    }
    format!("{:.0}%", complete as f64 * 100.0 / all as f64)
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut stdout = anstream::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value)?;
    writeln!(stdout)?;
    Ok(())
}

/// An answer shown as text by its command: a failure ends the command (said, with its
/// exit code), and so does `--output json`, which prints the answer as it is.
fn for_text<T: serde::Serialize>(
    args: &ClientArgs,
    answer: Result<T, ClientError>,
) -> anyhow::Result<Result<T, Exit>> {
    match answer {
        Err(err) => Ok(Err(fail(&err))),
        Ok(answer) if args.output() == Output::Json => {
            print_json(&answer)?;
            Ok(Err(Exit::Success))
        }
        Ok(answer) => Ok(Ok(answer)),
    }
}

/// `for_text`'s answer, or the command's end.
macro_rules! text_of {
    ($args:expr, $answer:expr) => {
        match super::for_text($args, $answer)? {
            Ok(answer) => answer,
            Err(exit) => return Ok(exit),
        }
    };
}

macro_rules! out {
    ($($arg:tt)*) => {{
        let mut stdout = anstream::stdout().lock();
        writeln!(stdout, $($arg)*)?;
    }};
}

/// A block of message lines on stderr.
pub(crate) fn eprint_block(text: &str) -> anyhow::Result<()> {
    let mut stderr = anstream::stderr().lock();
    stderr.write_all(text.as_bytes())?;
    Ok(())
}

fn eprintln_line(text: &str) -> anyhow::Result<()> {
    let mut stderr = std::io::stderr().lock();
    writeln!(stderr, "{text}")?;
    Ok(())
}

mod act;
mod bulk;
mod elements;
mod locks;
mod log;
mod notifications;
mod show;
mod start;
mod triggers;
mod watch;

pub(crate) use crate::client::api::NotificationQuery;
pub(crate) use act::{AnswerArgs, RetryArgs, answer, rerun};
use act::{pause, retry, stop};
pub(crate) use bulk::{Target, act};
pub(crate) use elements::elements;
pub(crate) use locks::locks;
pub(crate) use log::{LogArgs, log};
pub(crate) use notifications::notifications;
pub(crate) use show::{find, info, ps, running, schedules, status};
pub(crate) use start::{StartArgs, help_request, list, start};
pub(crate) use triggers::triggers;
pub(crate) use watch::watch;

/// `graph <id>`: the stored chain with each job's latest state.
pub(crate) async fn stored_graph(
    args: &ClientArgs,
    id: &str,
    format: crate::client::dot::GraphFormat,
) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let chain = match client.job_chain(id).await {
        Ok(chain) => chain,
        Err(err) => return Ok(fail(&err)),
    };
    crate::client::dot::print_chain(&chain, format)?;
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests;
