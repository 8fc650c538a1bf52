//! The commands that drive a running server, as Spin Cycle's `spinc` does (cli.md §1):
//! list, help for a request, start (with prompts on a terminal), status, info, log, ps,
//! running, stop, find — plus watch and the stored chain as DOT or JSON.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::time::Duration;

use chrono::{DateTime, Utc};
use proto::{CreateRequest, Request, RequestArgType, RequestFilter, State};
use serde_json::Value;

use crate::api_client::{Client, ClientError};
use crate::exit::Exit;

/// How a command prints what it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Output {
    Human,
    Json,
}

/// Options of every command that talks to a server.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ClientArgs {
    /// The Request Manager's address (or `addr:` in ~/.spindle.yaml)
    #[arg(long, env = "SPINDLE_ADDR", global = true)]
    addr: Option<String>,
    /// How long to wait for the Request Manager (Go duration)
    #[arg(long, env = "SPINDLE_TIMEOUT", global = true, default_value = "10s")]
    timeout: String,
    /// Output of commands that read: human text or JSON
    #[arg(long, value_enum, global = true, default_value_t = Output::Human)]
    pub(crate) output: Output,
    /// The API token to send (or `token:` in ~/.spindle.yaml); prefer the environment
    /// or the file to a flag, which others can see
    #[arg(long, env = "SPINDLE_TOKEN", global = true, hide_env_values = true)]
    token: Option<String>,
    /// PEM certificates to trust for https:// addresses instead of the system's roots
    /// (or `ca_cert:` in ~/.spindle.yaml)
    #[arg(long, env = "SPINDLE_CA_CERT", global = true)]
    ca_cert: Option<std::path::PathBuf>,
    /// A PEM client certificate to present (mutual TLS), with --client-key (or
    /// `client_cert:` in ~/.spindle.yaml)
    #[arg(long, env = "SPINDLE_CLIENT_CERT", global = true)]
    client_cert: Option<std::path::PathBuf>,
    /// The client certificate's PEM key (or `client_key:` in ~/.spindle.yaml)
    #[arg(long, env = "SPINDLE_CLIENT_KEY", global = true)]
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
    pub(crate) fn client(&self) -> anyhow::Result<Client> {
        let file = user_config()?;
        let addr = match &self.addr {
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
        let timeout = proto::duration::parse(&self.timeout)
            .map_err(|err| anyhow::anyhow!("--timeout {:?}: {err}", self.timeout))?;
        let credentials = crate::credentials::Credentials {
            token: self.token.clone().or(file.token).filter(|t| !t.is_empty()),
            ca: self.ca_cert.clone().or(file.ca_cert),
            client_cert: self.client_cert.clone().or(file.client_cert),
            client_key: self.client_key.clone().or(file.client_key),
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

/// Running jobs for a progress bar's message: `name: status line, ...`.
pub(crate) fn running_line(jobs: &[proto::JobStatus]) -> String {
    let parts: Vec<String> = jobs
        .iter()
        .map(|job| {
            if job.status.is_empty() {
                job.name.clone()
            } else {
                format!("{}: {}", job.name, job.status)
            }
        })
        .collect();
    parts.join(", ")
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

fn progress(request: &Request) -> String {
    if request.total_jobs == 0 {
        return "0%".to_owned();
    }
    format!(
        "{:.0}%",
        request.finished_jobs as f64 * 100.0 / request.total_jobs as f64
    )
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut stdout = anstream::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value)?;
    writeln!(stdout)?;
    Ok(())
}

macro_rules! out {
    ($($arg:tt)*) => {{
        let mut stdout = anstream::stdout().lock();
        writeln!(stdout, $($arg)*)?;
    }};
}

/// No command: the request types the server offers.
pub(crate) async fn list(args: &ClientArgs) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let specs = match client.request_list().await {
        Ok(specs) => specs,
        Err(err) => return Ok(fail(&err)),
    };
    if args.output == Output::Json {
        print_json(&specs)?;
        return Ok(Exit::Success);
    }
    out!("Request Manager address: {}\n\nRequests:", client.addr);
    for spec in &specs {
        out!("  {}", spec.name);
    }
    out!("\nspindle help  <request>\nspindle start <request>");
    Ok(Exit::Success)
}

/// `help <request>`: its args.
pub(crate) async fn help_request(args: &ClientArgs, name: &str) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let specs = match client.request_list().await {
        Ok(specs) => specs,
        Err(err) => return Ok(fail(&err)),
    };
    let Some(spec) = specs.iter().find(|spec| spec.name == name) else {
        crate::exit::eprintln_failure(&format!(
            "'{name}' is not a command or a request type; run `spindle --help` for commands, or `spindle` for request types"
        ));
        return Ok(Exit::NotFound);
    };
    if args.output == Output::Json {
        print_json(spec)?;
        return Ok(Exit::Success);
    }
    out!(
        "Request Manager address: {}\n\n{name} request args (* required)\n",
        client.addr
    );
    let width = spec.args.iter().map(|a| a.name.len()).max().unwrap_or(0);
    for arg in &spec.args {
        let required = arg.arg_type == RequestArgType::Required;
        let mut line = format!(
            "  {} {:width$}  {}",
            if required { '*' } else { ' ' },
            arg.name,
            arg.desc
        );
        if !required {
            line.push_str(&format!(" (default: {})", text_of(&arg.default)));
        }
        out!("{}", line.trim_end());
    }
    out!("\nTo start a {name} request, run 'spindle start {name}'");
    Ok(Exit::Success)
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A block of message lines on stderr.
pub(crate) fn eprint_block(text: &str) -> anyhow::Result<()> {
    let mut stderr = anstream::stderr().lock();
    stderr.write_all(text.as_bytes())?;
    Ok(())
}

/// Reads a line from stdin after printing a prompt on stderr.
fn ask(prompt: &str) -> anyhow::Result<String> {
    let mut stderr = std::io::stderr().lock();
    write!(stderr, "{prompt}")?;
    stderr.flush()?;
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line)? == 0 {
        anyhow::bail!("no more input");
    }
    Ok(line.trim().to_owned())
}

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StartArgs {
    /// The request type
    request: String,
    /// Request args as name=value (a JSON list or object value is passed as such)
    args: Vec<String>,
    /// Start without asking for confirmation
    #[arg(long, short = 'y')]
    yes: bool,
    /// Then watch it until it ends (exit code as for `watch`)
    #[arg(long)]
    watch: bool,
}

/// `start <request> [name=value ...]`: prompts for missing args on a terminal, confirms,
/// creates the request.
pub(crate) async fn start(args: &ClientArgs, start: &StartArgs) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let mut given = crate::args::parse_request_args(&start.args)?;
    let specs = match client.request_list().await {
        Ok(specs) => specs,
        Err(err) => return Ok(fail(&err)),
    };
    let Some(spec) = specs.iter().find(|spec| spec.name == start.request) else {
        crate::exit::eprintln_failure(&format!(
            "unknown request type `{}`; run `spindle` to list request types",
            start.request
        ));
        return Ok(Exit::NotFound);
    };
    let unknown: Vec<&String> = given
        .keys()
        .filter(|name| !spec.args.iter().any(|a| &a.name == *name))
        .collect();
    if !unknown.is_empty() {
        let names: Vec<&str> = unknown.iter().map(|s| s.as_str()).collect();
        crate::exit::eprintln_failure(&format!(
            "unknown request args: {}; run `spindle help {}` to list its args",
            names.join(", "),
            start.request
        ));
        return Ok(Exit::Usage);
    }
    let interactive = std::io::stdin().is_terminal();
    let prompt_all = given.is_empty();
    for arg in &spec.args {
        let required = arg.arg_type == RequestArgType::Required;
        if given.contains_key(&arg.name) || (!required && !prompt_all) {
            continue;
        }
        if !interactive {
            if required {
                let missing: Vec<&str> = spec
                    .args
                    .iter()
                    .filter(|a| {
                        a.arg_type == RequestArgType::Required && !given.contains_key(&a.name)
                    })
                    .map(|a| a.name.as_str())
                    .collect();
                crate::exit::eprintln_failure(&format!(
                    "missing required args: {}; give them as name=value (stdin is not a terminal, so there is no prompt)",
                    missing.join(", ")
                ));
                return Ok(Exit::Usage);
            }
            continue;
        }
        let default = text_of(&arg.default);
        let mut comment = format!("\n# {}", arg.desc);
        if !default.is_empty() {
            comment.push_str(&format!(" (default: {default})"));
        }
        eprintln_line(&comment)?;
        loop {
            let value = ask(&format!("{}=", arg.name))?;
            if value.is_empty() && required {
                eprintln_line(&format!("# Value required for {}", arg.name))?;
                continue;
            }
            if !value.is_empty() {
                given.insert(
                    arg.name.clone(),
                    crate::args::parse_request_args(&[format!("{}={value}", arg.name)])?[&arg.name]
                        .clone(),
                );
            }
            break;
        }
    }
    if interactive && !start.yes {
        // The re-run hint lists args in spec order, as spinc does.
        let pairs: Vec<String> = spec
            .args
            .iter()
            .filter_map(|arg| given.get(&arg.name).map(|value| arg_pair(&arg.name, value)))
            .collect();
        eprintln_line(&format!(
            "\n# spindle start {} {}\n",
            start.request,
            pairs.join(" ")
        ))?;
        // spinc's `ok`, and the `y`/`yes` people type out of habit.
        while !matches!(
            ask("Enter 'ok' to start, or ctrl-c to abort: ")?
                .to_ascii_lowercase()
                .as_str(),
            "ok" | "y" | "yes"
        ) {}
    }
    let create_request = CreateRequest {
        request_type: start.request.clone(),
        args: given,
        user: crate::api_client::caller(),
    };
    let request = match client.create(&create_request).await {
        Ok(request) => request,
        Err(ClientError::Api {
            status: 400,
            message,
        }) => {
            crate::exit::eprintln_failure(&message);
            return Ok(Exit::Usage);
        }
        Err(err) => return Ok(fail(&err)),
    };
    if args.output == Output::Json {
        print_json(&request)?;
    } else {
        out!("OK, started {} request {}", start.request, request.id);
        eprintln_line(&format!("\n  spindle status {}\n", request.id))?;
    }
    if start.watch {
        return watch(args, &request.id).await;
    }
    Ok(Exit::Success)
}

fn eprintln_line(text: &str) -> anyhow::Result<()> {
    let mut stderr = std::io::stderr().lock();
    writeln!(stderr, "{text}")?;
    Ok(())
}

pub(crate) async fn status(args: &ClientArgs, id: &str) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let request = match client.request(id).await {
        Ok(request) => request,
        Err(err) => return Ok(fail(&err)),
    };
    if args.output == Output::Json {
        print_json(&Request {
            job_chain: None,
            ..request
        })?;
        return Ok(Exit::Success);
    }
    let run = match (request.started_at, request.finished_at) {
        (None, _) => "not started".to_owned(),
        (Some(started), None) => runtime(Utc::now() - started),
        (Some(started), Some(finished)) => runtime(finished - started),
    };
    // Every arg the caller gave (optional ones too), not the defaults.
    let required: Vec<String> = request
        .args
        .iter()
        .filter(|a| a.arg_type == RequestArgType::Required || a.given)
        .map(|a| arg_pair(&a.name, &a.value))
        .collect();
    out!(
        "   state: {}\nprogress: {}\n runtime: {run}\n request: {}\n  caller: {}\n    args: {}",
        request_state(&request),
        progress(&request),
        request.request_type,
        request.user,
        required.join(" ")
    );
    if request.state == State::Pending && !request.error.is_empty() {
        out!("\n  {}", request.error);
    }
    print_failure(&client, &request).await?;
    Ok(Exit::Success)
}

/// For a failed request, which jobs failed and why (issue #12), after what was printed.
async fn print_failure(client: &Client, request: &Request) -> anyhow::Result<()> {
    if request.state != State::Fail {
        return Ok(());
    }
    if !request.error.is_empty() {
        out!("\n  reason: {}", request.error);
    }
    if let Ok(job_log) = client.job_log(&request.id).await {
        let text = crate::explain::explain(&request.id, &job_log);
        if !text.is_empty() {
            out!("\n{}", text.trim_end());
        }
    }
    Ok(())
}

pub(crate) async fn info(args: &ClientArgs, id: &str) -> anyhow::Result<Exit> {
    let client = args.client()?;
    // The JSON is everything, the chain included, as Spin Cycle's was.
    let read = if args.output == Output::Json {
        client.request_with_chain(id).await
    } else {
        client.request(id).await
    };
    let request = match read {
        Ok(request) => request,
        Err(err) => return Ok(fail(&err)),
    };
    if args.output == Output::Json {
        print_json(&request)?;
        return Ok(Exit::Success);
    }
    let ago = |t: Option<DateTime<Utc>>| {
        t.map_or_else(String::new, |t| {
            format!("{} ({} ago)", time(Some(t)), runtime(Utc::now() - t))
        })
    };
    let args_text: Vec<String> = request
        .args
        .iter()
        .filter(|a| a.arg_type != RequestArgType::Static)
        .map(|a| arg_pair(&a.name, &a.value))
        .collect();
    out!(
        "      id: {}\n request: {}\n  caller: {}\n created: {}\n started: {}\nfinished: {}\n   state: {}\n    host: {}\n    jobs: {} ({} complete)\n    args: {}",
        request.id,
        request.request_type,
        request.user,
        ago(Some(request.created_at)),
        ago(request.started_at),
        ago(request.finished_at),
        request_state(&request),
        request.jr_url,
        request.total_jobs,
        request.finished_jobs,
        args_text.join(" ")
    );
    if !request.spec_version.is_empty() {
        out!(
            "   specs: {} (spindle's GET /api/v1/requests/{}/spec has their text)",
            request.spec_version,
            request.id
        );
    }
    // Spindle's audit trail; Spin Cycle's Request Manager has none (404): nothing shown.
    if let Ok(trail) = client.audit(&request.id).await
        && !trail.is_empty()
    {
        out!("   audit:");
        for event in trail {
            let user = if event.user.is_empty() {
                "(unnamed)"
            } else {
                event.user.as_str()
            };
            let from = if event.address.is_empty() {
                String::new()
            } else {
                format!(" from {}", event.address)
            };
            out!(
                "          {} {} by {user}{from}",
                time(Some(event.at)),
                event.action
            );
        }
    }
    print_failure(&client, &request).await?;
    Ok(Exit::Success)
}

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LogArgs {
    /// The request id
    id: String,
    /// Only the tries of this job: its id, or its name (every job of that name, such as
    /// each expansion of a node)
    #[arg(long)]
    job: Option<String>,
    /// Keep printing, until the request ends: the output of running jobs as they print
    /// it, and each try's entry when it ends
    #[arg(long, short = 'f')]
    follow: bool,
}

/// `streamed`: the try's output was printed live already, so it is not printed again.
fn print_entry(entry: &proto::JobLog, streamed: bool) -> anyhow::Result<()> {
    let at = |nanos: i64| {
        if nanos == 0 {
            "N/A".to_owned()
        } else {
            DateTime::from_timestamp_nanos(nanos)
                .format("%Y-%m-%d %H:%M:%S%.3f UTC")
                .to_string()
        }
    };
    let (stdout, stderr) = if streamed {
        ("(shown above)", "(shown above)")
    } else {
        (entry.stdout.trim_end(), entry.stderr.trim_end())
    };
    out!(
        "job id:   {}\njob name: {}\njob type: {}\nstate:    {}\nexit:     {}\nerror:    {}\ntry:      {}\nruntime:  {:.6}s\nstarted:  {}\nfinished: {}\nstdout:   {}\nstderr:   {}\n--",
        entry.job_id,
        entry.name,
        entry.job_type,
        entry.state,
        entry.exit,
        entry.error,
        entry.r#try,
        (entry.finished_at - entry.started_at) as f64 / 1e9,
        at(entry.started_at),
        at(entry.finished_at),
        stdout,
        stderr
    );
    Ok(())
}

/// What `log --follow` has printed so far.
#[derive(Default)]
struct Followed {
    /// (job, try) of the entries printed.
    entries: std::collections::HashSet<(String, u32)>,
    /// The output cursor.
    after: i64,
    /// Per (job, try, stream), the offset just past what was printed.
    ends: std::collections::HashMap<(String, u32, proto::Stream), u64>,
    /// The stream printed last (a header is printed when it changes).
    current: Option<(String, u32, proto::Stream)>,
}

impl Followed {
    /// Prints a live output chunk: a header when it is from another try or stream than
    /// the last one, a marker when bytes before it were cut.
    fn print_chunk(
        &mut self,
        chunk: &proto::OutputChunk,
        names: &std::collections::HashMap<String, String>,
        json: bool,
    ) -> anyhow::Result<()> {
        let key = (chunk.job_id.clone(), chunk.r#try, chunk.stream);
        let end = self.ends.entry(key.clone()).or_default();
        if chunk.end() <= *end {
            return Ok(());
        }
        let cut = chunk.offset.saturating_sub(*end);
        *end = chunk.end();
        if json {
            out!("{}", serde_json::to_string(chunk)?);
            return Ok(());
        }
        let mut text = String::new();
        if self.current.as_ref() != Some(&key) {
            if self.current.is_some() {
                text.push('\n');
            }
            let name = names.get(&chunk.job_id).map_or("?", String::as_str);
            text.push_str(&format!(
                "==> {name} (job {}) try {} {} <==\n",
                chunk.job_id, chunk.r#try, chunk.stream
            ));
            self.current = Some(key);
        }
        if cut > 0 {
            text.push_str(&format!("[spindle: {cut} bytes cut]\n"));
        }
        text.push_str(&chunk.data);
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(text.as_bytes())?;
        stdout.flush()?;
        Ok(())
    }

    fn streamed(&self, entry: &proto::JobLog) -> bool {
        [proto::Stream::Stdout, proto::Stream::Stderr]
            .into_iter()
            .any(|stream| {
                self.ends
                    .contains_key(&(entry.job_id.clone(), entry.r#try, stream))
            })
    }
}

/// `log <id>`: every try, oldest first; with `--follow`, also the output of running
/// tries as it is produced, until the request ends.
pub(crate) async fn log(args: &ClientArgs, log: &LogArgs) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let chain = if log.job.is_some() || log.follow {
        match client.job_chain(&log.id).await {
            Ok(chain) => Some(chain),
            Err(err) => return Ok(fail(&err)),
        }
    } else {
        None
    };
    let names: std::collections::HashMap<String, String> = chain
        .iter()
        .flat_map(|chain| chain.jobs.values())
        .map(|job| (job.id.clone(), job.name.clone()))
        .collect();
    // `--job`: the ids of the jobs it names, by id or by name.
    let jobs: Option<std::collections::HashSet<String>> = match (&log.job, &chain) {
        (Some(wanted), Some(chain)) => {
            let ids: std::collections::HashSet<String> = chain
                .jobs
                .values()
                .filter(|job| &job.id == wanted || &job.name == wanted)
                .map(|job| job.id.clone())
                .collect();
            if ids.is_empty() {
                let mut names: Vec<&str> = chain.jobs.values().map(|j| j.name.as_str()).collect();
                names.sort_unstable();
                names.dedup();
                crate::exit::eprintln_failure(&format!(
                    "request {} has no job with id or name `{wanted}`; expected a job id or one of its job names: {}",
                    log.id,
                    names.join(", ")
                ));
                return Ok(Exit::NotFound);
            }
            Some(ids)
        }
        _ => None,
    };
    let wanted = |job_id: &str| jobs.as_ref().is_none_or(|ids| ids.contains(job_id));
    let json = args.output == Output::Json;
    if !log.follow {
        let mut entries = match client.job_log(&log.id).await {
            Ok(entries) => entries,
            Err(err) => return Ok(fail(&err)),
        };
        entries.retain(|e| wanted(&e.job_id));
        entries.sort_by_key(|e| (e.finished_at, e.job_id.clone(), e.r#try));
        if json {
            print_json(&entries)?;
        } else {
            for entry in &entries {
                print_entry(entry, false)?;
            }
        }
        return Ok(Exit::Success);
    }
    let mut followed = Followed::default();
    // Output is polled every 250 ms; the job log (every entry with its output) only every
    // fourth time, and once more at the end.
    let mut poll = 0u64;
    loop {
        poll += 1;
        // The output first: its page says the request's state, and once that is final
        // an empty page means there is no more output.
        let mut finished;
        loop {
            let page = match client.output(&log.id, followed.after).await {
                Ok(page) => page,
                Err(err) => return Ok(fail(&err)),
            };
            finished = page.state.is_finished();
            followed.after = page.next;
            for chunk in page.chunks.iter().filter(|chunk| wanted(&chunk.job_id)) {
                followed.print_chunk(chunk, &names, json)?;
            }
            if page.chunks.len() < proto::OutputQuery::MAX_LIMIT as usize {
                break;
            }
        }
        if !finished && poll % 4 != 1 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            continue;
        }
        let mut entries = match client.job_log(&log.id).await {
            Ok(entries) => entries,
            Err(err) => return Ok(fail(&err)),
        };
        entries.retain(|e| wanted(&e.job_id));
        entries.sort_by_key(|e| (e.finished_at, e.job_id.clone(), e.r#try));
        for entry in entries {
            if followed.entries.insert((entry.job_id.clone(), entry.r#try)) {
                if followed.current.take().is_some() {
                    out!("");
                }
                if json {
                    out!("{}", serde_json::to_string(&entry)?);
                } else {
                    print_entry(&entry, followed.streamed(&entry))?;
                }
            }
        }
        if finished {
            return Ok(Exit::Success);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `ps [id]`: running jobs with their live status line.
pub(crate) async fn ps(args: &ClientArgs, id: Option<&str>) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let status = match client.running(id).await {
        Ok(status) => status,
        Err(err) => return Ok(fail(&err)),
    };
    if args.output == Output::Json {
        print_json(&status)?;
        return Ok(Exit::Success);
    }
    if status.jobs.is_empty() {
        return Ok(Exit::Success);
    }
    // The EACH column (an expansion's element, such as host=db2) only when a job has one.
    let each_text = |job: &proto::JobStatus| {
        job.each
            .iter()
            .map(|(name, value)| match value {
                Value::String(text) => format!("{name}={text}"),
                other => format!("{name}={other}"),
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    let with_each = status.jobs.iter().any(|job| !job.each.is_empty());
    let each_column = |text: &str| {
        if with_each {
            format!(" {:<20}", squeeze(text, 20))
        } else {
            String::new()
        }
    };
    out!(
        "{:<20} {:<20} {:>4}  {:<9} {:<8} {:>3} {:<5} {:<22}{} STATUS",
        "REQUEST",
        "ID",
        "PRG",
        "USER",
        "RUNTIME",
        "TRY",
        "JOBID",
        "JOB",
        each_column("EACH")
    );
    let now = Utc::now();
    for job in &status.jobs {
        let (request_type, id, prg, user) = match status.requests.get(&job.request_id) {
            Some(request) => (
                squeeze(&request.request_type, 20),
                request.id.clone(),
                progress(request),
                squeeze(&request.user, 9),
            ),
            None => (
                "unknown".to_owned(),
                String::new(),
                "0".to_owned(),
                String::new(),
            ),
        };
        let started = DateTime::from_timestamp_nanos(job.started_at);
        out!(
            "{:<20} {:<20} {:>4}  {:<9} {:<8} {:>3} {:<5} {:<22}{} {}",
            request_type,
            id,
            prg,
            user,
            runtime(now - started),
            job.r#try,
            job.job_id,
            squeeze(&job.name, 22),
            each_column(&each_text(job)),
            job.status
        );
    }
    Ok(Exit::Success)
}

/// `running <id>`: exit 0 while PENDING, RUNNING or SUSPENDED, else 1; prints nothing.
pub(crate) async fn running(args: &ClientArgs, id: &str) -> anyhow::Result<Exit> {
    let client = args.client()?;
    match client.request(id).await {
        Ok(request)
            if matches!(
                request.state,
                State::Pending | State::Running | State::Suspended
            ) =>
        {
            Ok(Exit::Success)
        }
        Ok(_) => Ok(Exit::Failure),
        Err(err) => Ok(fail(&err)),
    }
}

/// `schedules`: each schedule with its next and last runs.
pub(crate) async fn schedules(args: &ClientArgs) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let schedules = match client.schedules().await {
        Ok(schedules) => schedules,
        Err(err) => return Ok(fail(&err)),
    };
    if args.output == Output::Json {
        print_json(&schedules)?;
        return Ok(Exit::Success);
    }
    if schedules.is_empty() {
        return Ok(Exit::Success);
    }
    out!(
        "{:<20} {:<16} {:<14} {:<16} {:<20} LAST",
        "NAME",
        "CRON",
        "TIMEZONE",
        "REQUEST",
        "NEXT"
    );
    for schedule in &schedules {
        let last = match &schedule.last {
            None => "never".to_owned(),
            Some(run) if !run.request_id.is_empty() => {
                format!("{} {}", time(Some(run.due_at)), run.request_id)
            }
            Some(run) if !run.skipped.is_empty() => {
                format!("{} skipped: {}", time(Some(run.due_at)), run.skipped)
            }
            Some(run) => format!("{} starting", time(Some(run.due_at))),
        };
        out!(
            "{:<20} {:<16} {:<14} {:<16} {:<20} {last}",
            squeeze(&schedule.name, 20),
            squeeze(&schedule.cron, 16),
            squeeze(&schedule.timezone, 14),
            squeeze(&schedule.request, 16),
            schedule
                .next
                .map(|next| time(Some(next)))
                .unwrap_or_else(|| "never".to_owned())
        );
    }
    Ok(Exit::Success)
}

/// `approve`/`reject <id> [job] [--comment TEXT]`.
#[derive(Debug, clap::Args)]
pub(crate) struct AnswerArgs {
    /// The request
    id: String,
    /// The approval job: its id or name (default: the one that waits)
    job: Option<String>,
    /// Kept with the answer, and shown in the job's log entry
    #[arg(long)]
    comment: Option<String>,
}

pub(crate) async fn answer(
    args: &ClientArgs,
    answer: &AnswerArgs,
    approved: bool,
) -> anyhow::Result<Exit> {
    let client = args.client()?;
    match client
        .answer(
            &answer.id,
            answer.job.as_deref(),
            answer.comment.as_deref(),
            approved,
        )
        .await
    {
        Ok(()) => {
            out!(
                "OK, {} {}{}",
                if approved { "approved" } else { "rejected" },
                answer.id,
                answer
                    .job
                    .as_deref()
                    .map(|job| format!(" ({job})"))
                    .unwrap_or_default()
            );
            Ok(Exit::Success)
        }
        Err(ClientError::Api {
            status: 400,
            message,
        }) => {
            crate::exit::eprintln_failure(&message);
            Ok(Exit::Usage)
        }
        Err(err) => Ok(fail(&err)),
    }
}

/// `retry <id> [--from JOB]`: the same request runs again.
pub(crate) async fn retry(args: &ClientArgs, id: &str, from: Option<&str>) -> anyhow::Result<Exit> {
    let client = args.client()?;
    match client.retry(id, from).await {
        Ok(()) => {
            match from {
                Some(job) => out!("OK, retrying {id} from {job}"),
                None => out!("OK, retrying {id}: its failed, stopped and unrun jobs run again"),
            }
            eprintln_line(&format!("\n  spindle watch {id}\n"))?;
            Ok(Exit::Success)
        }
        Err(ClientError::Api {
            status: 400,
            message,
        }) => {
            crate::exit::eprintln_failure(&message);
            Ok(Exit::Usage)
        }
        Err(err) => Ok(fail(&err)),
    }
}

/// `rerun <id>`: a new request of the same type with the args the first was given.
pub(crate) async fn rerun(args: &ClientArgs, id: &str) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let first = match client.request(id).await {
        Ok(request) => request,
        Err(err) => return Ok(fail(&err)),
    };
    let given = first
        .args
        .iter()
        .filter(|arg| arg.given && arg.arg_type != RequestArgType::Static)
        .map(|arg| (arg.name.clone(), arg.value.clone()))
        .collect();
    let create_request = CreateRequest {
        request_type: first.request_type.clone(),
        args: given,
        user: crate::api_client::caller(),
    };
    let request = match client.create(&create_request).await {
        Ok(request) => request,
        Err(err) => return Ok(fail(&err)),
    };
    if args.output == Output::Json {
        print_json(&request)?;
    } else {
        out!(
            "OK, started {} request {} (a rerun of {id})",
            first.request_type,
            request.id
        );
        eprintln_line(&format!("\n  spindle status {}\n", request.id))?;
    }
    Ok(Exit::Success)
}

/// `pause <id>` (`paused`) and `resume <id>`.
pub(crate) async fn pause(args: &ClientArgs, id: &str, paused: bool) -> anyhow::Result<Exit> {
    let client = args.client()?;
    match client.pause(id, paused).await {
        Ok(()) if paused => {
            out!(
                "OK, paused {id}: running jobs finish, nothing new starts until `spindle resume {id}`"
            );
            Ok(Exit::Success)
        }
        Ok(()) => {
            out!("OK, resumed {id}");
            Ok(Exit::Success)
        }
        Err(err) => Ok(fail(&err)),
    }
}

pub(crate) async fn stop(args: &ClientArgs, id: &str) -> anyhow::Result<Exit> {
    let client = args.client()?;
    match client.stop(id).await {
        Ok(()) => {
            out!("OK, stopped {id}");
            Ok(Exit::Success)
        }
        Err(err) => Ok(fail(&err)),
    }
}

/// A `since=`/`until=` value: a time (`YYYY-MM-DD HH:MM:SS UTC` or RFC 3339), a date
/// (its start, UTC), or how long before `now` (a Go duration, or whole days: `2d`).
fn filter_time(value: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if let Ok(time) =
        chrono::NaiveDateTime::parse_from_str(value.trim_end_matches(" UTC"), "%Y-%m-%d %H:%M:%S")
    {
        return Some(time.and_utc());
    }
    if let Ok(time) = DateTime::parse_from_rfc3339(value) {
        return Some(time.with_timezone(&Utc));
    }
    if let Ok(date) = chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d") {
        return Some(date.and_hms_opt(0, 0, 0)?.and_utc());
    }
    let ago = match value.strip_suffix('d') {
        Some(days) => chrono::Duration::days(days.parse().ok()?),
        None => chrono::Duration::from_std(proto::duration::parse(value).ok()?).ok()?,
    };
    now.checked_sub_signed(ago)
}

/// Reads `find` filters (`type=`, `states=`, `user=`, `args=`, `since=`, `until=`,
/// `limit=`, `offset=`).
fn find_filter(words: &[String]) -> anyhow::Result<RequestFilter> {
    let mut filter = RequestFilter {
        limit: 10,
        ..RequestFilter::default()
    };
    let mut seen = std::collections::HashSet::new();
    for word in words {
        let Some((name, value)) = word.split_once('=') else {
            anyhow::bail!(
                "invalid filter {word:?}; expected filter=value (type, states, user, args, since, until, limit, offset)"
            );
        };
        if !seen.insert(name.to_owned()) {
            anyhow::bail!("filter '{name}' given more than once");
        }
        let time = |value: &str| -> anyhow::Result<DateTime<Utc>> {
            filter_time(value, Utc::now()).ok_or_else(|| {
                anyhow::anyhow!(
                    "invalid time {value:?}; expected a time ('YYYY-MM-DD HH:MM:SS UTC', RFC 3339), a date (YYYY-MM-DD, its start in UTC) or how long ago (1h, 30m, 2d)"
                )
            })
        };
        match name {
            "type" => filter.request_type = Some(value.to_owned()),
            "user" => filter.user = Some(value.to_owned()),
            "states" | "state" => {
                for state in value.split(',') {
                    let state = state.trim().to_ascii_uppercase();
                    filter.states.push(
                        state
                            .parse()
                            .map_err(|err| anyhow::anyhow!("invalid state: {err}"))?,
                    );
                }
            }
            "args" | "arg" => {
                for pair in value.split(',') {
                    let Some((key, arg_value)) = pair.split_once('=') else {
                        anyhow::bail!(
                            "invalid request arg {pair:?}; expected args=key1=value1,key2=value2"
                        );
                    };
                    filter.args.insert(key.to_owned(), arg_value.to_owned());
                }
            }
            "since" => filter.since = Some(time(value)?),
            "until" => filter.until = Some(time(value)?),
            "limit" => {
                filter.limit = value.parse().map_err(|_| {
                    anyhow::anyhow!("invalid limit {value:?}; expected a number >= 0")
                })?
            }
            "offset" => {
                filter.offset = value.parse().map_err(|_| {
                    anyhow::anyhow!("invalid offset {value:?}; expected a number >= 0")
                })?
            }
            other => anyhow::bail!(
                "unknown filter '{other}'; expected one of type, states, user, args, since, until, limit, offset"
            ),
        }
    }
    Ok(filter)
}

pub(crate) async fn find(args: &ClientArgs, words: &[String]) -> anyhow::Result<Exit> {
    let filter = find_filter(words)?;
    let client = args.client()?;
    let requests = match client.find(&filter).await {
        Ok(requests) => requests,
        Err(err) => return Ok(fail(&err)),
    };
    if args.output == Output::Json {
        print_json(&requests)?;
        return Ok(Exit::Success);
    }
    if requests.is_empty() {
        return Ok(Exit::Success);
    }
    out!(
        "{:<20} {:<40} {:<16} {:<9} {:<23} {:<23} {:<23} JOBS",
        "ID",
        "REQUEST",
        "USER",
        "STATE",
        "CREATED",
        "STARTED",
        "FINISHED"
    );
    for request in &requests {
        out!(
            "{:<20} {:<40} {:<16} {} {:<23} {:<23} {:<23} {} / {}",
            squeeze(&request.id, 20),
            squeeze(&request.request_type, 40),
            squeeze(&request.user, 16),
            state_text(request.state, 9),
            time(Some(request.created_at)),
            time(request.started_at),
            time(request.finished_at),
            request.finished_jobs,
            request.total_jobs
        );
    }
    Ok(Exit::Success)
}

/// `watch <id>`: a live progress bar and the running jobs until the request ends;
/// exit 0 for COMPLETE, 1 for FAIL, 3 for STOPPED.
pub(crate) async fn watch(args: &ClientArgs, id: &str) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} jobs  {wide_msg}",
        )
        .expect("the template is valid"),
    );
    let request = loop {
        let request = match client.request(id).await {
            Ok(request) => request,
            Err(err) => {
                bar.finish_and_clear();
                return Ok(fail(&err));
            }
        };
        bar.set_length(request.total_jobs);
        bar.set_position(request.finished_jobs);
        if request.state.is_finished() {
            break request;
        }
        if let Ok(status) = client.running(Some(id)).await {
            let line = running_line(&status.jobs);
            bar.set_message(if request.paused {
                format!("paused (spindle resume {id}) {line}")
            } else {
                line
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    bar.finish_and_clear();
    if args.output == Output::Json {
        print_json(&Request {
            job_chain: None,
            ..request.clone()
        })?;
    } else {
        out!("{} {}", request.id, state_text(request.state, 0));
        std::io::stdout().flush()?;
        if request.state == State::Fail
            && let Ok(job_log) = client.job_log(&request.id).await
        {
            eprint_block(&crate::explain::explain(&request.id, &job_log))?;
        }
    }
    Ok(match request.state {
        State::Complete => Exit::Success,
        State::Stopped => Exit::Stopped,
        _ => Exit::Failure,
    })
}

/// `graph <id>`: the stored chain with each job's latest state.
pub(crate) async fn stored_graph(
    args: &ClientArgs,
    id: &str,
    format: crate::GraphFormat,
) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let chain = match client.job_chain(id).await {
        Ok(chain) => chain,
        Err(err) => return Ok(fail(&err)),
    };
    crate::graph::print_chain(&chain, format)?;
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests;
