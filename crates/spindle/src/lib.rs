//! The `spindle` command line: parsing, the commands, and the one place that picks exit
//! codes. `main.rs` runs it with the built-in job types; a user's own binary runs it with
//! its own [`job::Registry`] (see `examples/custom-job`).

mod args;
mod client;
mod exit;
mod graph;
mod run;
mod service;

use client::spinc;
use service::{import, lint, supervise};

use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};

use crate::exit::{EXIT_CODES, Exit, block_on, eprintln_failure};

/// Spindle: job orchestration that reads Spin Cycle's request specs.
#[derive(Debug, Parser)]
#[command(name = "spindle", version, about, after_help = EXIT_CODES, disable_help_subcommand = true)]
struct Cli {
    #[command(flatten)]
    client: spinc::ClientArgs,
    /// Without a command: the request types of the server at --addr
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check request specs and print every problem found, like a compiler
    Lint(lint::LintArgs),
    /// Build a request's job chain from specs and print it, without running anything
    Graph(graph::GraphArgs),
    /// Run one request here and now: embedded store, Request Manager and Job Runner in
    /// this process, a progress bar; Ctrl-C stops it
    Run(run::RunArgs),
    /// Serve Spin Cycle's API with the Request Manager and a Job Runner in one process
    Server(service::ServerArgs),
    /// Serve the Request Manager alone; chains go to Job Runners over HTTP (--jr-url)
    Rm(service::RmArgs),
    /// Serve a Job Runner that reports to a Request Manager over HTTP (--rm-url)
    Jr(service::JrArgs),
    /// Print Spindle's version and the Spin Cycle API version it speaks
    Version,
    /// Help for a command, or a request type's args (from the server)
    Help {
        /// A command or a request type
        topic: Option<String>,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Start a request (prompts for missing args on a terminal, then asks to confirm)
    Start {
        #[command(flatten)]
        start: spinc::StartArgs,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// A request's state, progress and runtime
    Status {
        id: String,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// The elements of a request's `each:` expansions: each one's state, tries and
    /// runtime (all of them, or those of one node, or in one state)
    Elements {
        id: String,
        /// Only this `each:` node's
        #[arg(long)]
        node: Option<String>,
        /// Only those pending, running, complete, failed or stopped
        #[arg(long)]
        state: Option<String>,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Everything about a request
    Info {
        id: String,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// A request's job log: every try, oldest first
    Log {
        #[command(flatten)]
        log: spinc::LogArgs,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Running requests and jobs with their live status line
    Ps {
        id: Option<String>,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Exit 0 while a request is PENDING, RUNNING or SUSPENDED, else 1 (for shell loops)
    Running {
        id: String,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Stop a running request, or (--all) every request filters find
    Stop {
        #[command(flatten)]
        target: spinc::Target,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Pause a request (or, --all, every request filters find): running jobs finish,
    /// nothing new starts until `resume`
    Pause {
        #[command(flatten)]
        target: spinc::Target,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Resume a paused request, or (--all) every request filters find
    Resume {
        #[command(flatten)]
        target: spinc::Target,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Run a FAIL or STOPPED request again as the same request: completed jobs stay
    /// complete, the others run again, try numbers continue
    Retry {
        #[command(flatten)]
        target: spinc::Target,
        #[command(flatten)]
        part: spinc::RetryArgs,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Start a new request of the same type with the same args
    Rerun {
        id: String,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// The schedules of the server's specs, with their next and last runs
    Schedules {
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// The triggers (events from other systems that start requests) and their latest
    /// deliveries
    Triggers {
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// The notifications sent to the config's webhooks (request ends, approvals that
    /// wait, lost runners), newest first, and how each delivery went
    Notifications {
        /// Only this webhook's
        #[arg(long)]
        webhook: Option<String>,
        /// Only those pending, delivered or failed (given up on)
        #[arg(long)]
        status: Option<String>,
        /// Only those about this request
        #[arg(long)]
        request: Option<String>,
        /// At most this many
        #[arg(long, default_value_t = 50)]
        limit: u32,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Every lock held or waited for: its holders and its queue
    Locks {
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Approve an approval job of a request (the one that waits, or JOB)
    Approve {
        #[command(flatten)]
        answer: spinc::AnswerArgs,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Reject an approval job of a request (the one that waits, or JOB): its try fails
    Reject {
        #[command(flatten)]
        answer: spinc::AnswerArgs,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Find requests: type=, states=A,B, user=, args=k=v,k2=v2, since=, until=, limit=, offset=
    Find {
        filters: Vec<String>,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Show a request's progress and running jobs until it ends (exit 0 COMPLETE, 1 FAIL, 3 STOPPED)
    Watch {
        id: String,
        #[command(flatten)]
        client: spinc::ClientArgs,
    },
    /// Copy another system's history into Spindle's database
    #[command(subcommand)]
    Import(ImportCommand),
    /// Print shell completions
    Completions { shell: clap_complete::Shell },
    /// Make API tokens for a server's tokens file (`auth.tokens`)
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Print a new token, once, and the line to add to the tokens file (which keeps only
    /// its hash)
    Create {
        /// Who the token names (the caller, and the user of the requests it creates)
        #[arg(long)]
        user: String,
        /// A role the token grants (repeat for more); roles are matched against the
        /// specs' `acl:` entries and the server's admin and service roles
        #[arg(long = "role")]
        roles: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
enum ImportCommand {
    /// Copy a Spin Cycle 2.x database (requests, archives, job log, suspended chains):
    /// idempotent and resumable; ends with counts per table and per state
    Spincycle(import::SpincycleArgs),
}

/// Runs the `spindle` command line with the job types of `registry`.
/// `spindle token create`: the token on stdout's first line, the tokens file's line on
/// the second; nothing is stored.
fn token_create(user: &str, roles: &[String]) -> anyhow::Result<Exit> {
    let bad = |text: &str| text.is_empty() || text.chars().any(|c| c.is_whitespace() || c == ',');
    if bad(user) {
        eprintln_failure(&format!(
            "--user {user:?}: expected a name without spaces or commas"
        ));
        return Ok(Exit::Usage);
    }
    if let Some(role) = roles.iter().find(|r| bad(r)) {
        eprintln_failure(&format!(
            "--role {role:?}: expected a role without spaces or commas"
        ));
        return Ok(Exit::Usage);
    }
    let token = auth::new_token();
    let line = auth::TokenLine::of(&token, user, roles);
    #[allow(clippy::print_stdout, reason = "the command's output")]
    {
        println!("{token}");
        println!("{line}");
    }
    #[allow(clippy::print_stderr, reason = "what the two lines are")]
    {
        eprintln!(
            "The first line is the token for {user}: it is shown only now. Add the second line to the server's tokens file (auth.tokens) and restart it."
        );
    }
    Ok(Exit::Success)
}

/// [`main`] with a team's own ways of recognising callers, asked before the built-in
/// ones when the config file has an `auth:` section.
pub fn main_with_authenticators(
    registry: job::Registry,
    authenticators: Vec<std::sync::Arc<dyn auth::Authenticator>>,
) -> ExitCode {
    service::set_authenticators(authenticators);
    main(registry)
}

// Long because it dispatches every command: one match arm a command.
pub fn main(registry: job::Registry) -> ExitCode {
    let mut args = std::env::args_os();
    if args
        .nth(1)
        .is_some_and(|command| command == supervise::COMMAND)
    {
        let code = supervise::run(args.collect());
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // Programs of `shell-command` jobs run under this binary's supervisor, so that they
    // die with the runner that started them.
    if let Ok(exe) = std::env::current_exe() {
        job::set_supervisor(exe, supervise::COMMAND);
    }
    // The process's one TLS crypto provider (ring), for every HTTPS client in it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    let top = cli.client;
    let res = match cli.command {
        None => block_on(spinc::list(&top)),
        Some(command) => match command {
            Command::Lint(args) => lint::run(&args, &registry),
            Command::Graph(args) => {
                let client = args.client.clone().or(&top);
                graph::run(&args, registry, &client)
            }
            Command::Run(args) => {
                let output = args.output.unwrap_or(top.output());
                block_on(run::run(&args, registry, output))
            }
            Command::Server(args) => block_on(service::server(&args, registry)),
            Command::Rm(args) => block_on(service::request_manager(&args, registry)),
            Command::Jr(args) => block_on(service::job_runner(&args, registry)),
            Command::Version => {
                version();
                Ok(Exit::Success)
            }
            Command::Help {
                topic: None,
                client: _,
            } => Cli::command()
                .print_long_help()
                .map(|()| Exit::Success)
                .map_err(Into::into),
            Command::Help {
                topic: Some(topic),
                client,
            } => match built_command().find_subcommand_mut(&topic) {
                Some(command) => command
                    .print_long_help()
                    .map(|()| Exit::Success)
                    .map_err(Into::into),
                None => block_on(spinc::help_request(&client.or(&top), &topic)),
            },
            Command::Start { start, client } => block_on(spinc::start(&client.or(&top), &start)),
            Command::Status { id, client } => block_on(spinc::status(&client.or(&top), &id)),
            Command::Info { id, client } => block_on(spinc::info(&client.or(&top), &id)),
            Command::Elements {
                id,
                node,
                state,
                client,
            } => block_on(spinc::elements(
                &client.or(&top),
                &id,
                node.as_deref(),
                state.as_deref(),
            )),
            Command::Log { log, client } => block_on(spinc::log(&client.or(&top), &log)),
            Command::Ps { id, client } => block_on(spinc::ps(&client.or(&top), id.as_deref())),
            Command::Running { id, client } => block_on(spinc::running(&client.or(&top), &id)),
            Command::Stop { target, client } => block_on(spinc::act(
                &client.or(&top),
                proto::BulkAction::Stop,
                &target,
                &spinc::RetryArgs::default(),
            )),
            Command::Pause { target, client } => block_on(spinc::act(
                &client.or(&top),
                proto::BulkAction::Pause,
                &target,
                &spinc::RetryArgs::default(),
            )),
            Command::Resume { target, client } => block_on(spinc::act(
                &client.or(&top),
                proto::BulkAction::Resume,
                &target,
                &spinc::RetryArgs::default(),
            )),
            Command::Retry {
                target,
                part,
                client,
            } => block_on(spinc::act(
                &client.or(&top),
                proto::BulkAction::Retry,
                &target,
                &part,
            )),
            Command::Rerun { id, client } => block_on(spinc::rerun(&client.or(&top), &id)),
            Command::Schedules { client } => block_on(spinc::schedules(&client.or(&top))),
            Command::Triggers { client } => block_on(spinc::triggers(&client.or(&top))),
            Command::Locks { client } => block_on(spinc::locks(&client.or(&top))),
            Command::Notifications {
                webhook,
                status,
                request,
                limit,
                client,
            } => block_on(spinc::notifications(
                &client.or(&top),
                &spinc::NotificationQuery {
                    webhook,
                    status,
                    request,
                    limit,
                },
            )),
            Command::Approve { answer, client } => {
                block_on(spinc::answer(&client.or(&top), &answer, true))
            }
            Command::Reject { answer, client } => {
                block_on(spinc::answer(&client.or(&top), &answer, false))
            }
            Command::Find { filters, client } => block_on(spinc::find(&client.or(&top), &filters)),
            Command::Watch { id, client } => block_on(spinc::watch(&client.or(&top), &id)),
            Command::Token(TokenCommand::Create { user, roles }) => token_create(&user, &roles),
            Command::Import(ImportCommand::Spincycle(args)) => block_on(import::spincycle(&args)),
            Command::Completions { shell } => {
                clap_complete::generate(
                    shell,
                    &mut Cli::command(),
                    "spindle",
                    &mut std::io::stdout(),
                );
                Ok(Exit::Success)
            }
        },
    };
    match res {
        Ok(exit) => ExitCode::from(exit.code()),
        // A reader that went away (`spindle graph ... | head`) is not an error.
        Err(err)
            if err.chain().any(|cause| {
                cause
                    .downcast_ref::<std::io::Error>()
                    .map(std::io::Error::kind)
                    == Some(std::io::ErrorKind::BrokenPipe)
                    || cause
                        .downcast_ref::<serde_json::Error>()
                        .and_then(serde_json::Error::io_error_kind)
                        == Some(std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::from(Exit::Success.code())
        }
        Err(err) => {
            let mut stderr = anstream::stderr();
            let style = anstyle::Style::new()
                .bold()
                .fg_color(Some(anstyle::AnsiColor::Red.into()));
            let _ = std::io::Write::write_fmt(
                &mut stderr,
                format_args!("{style}error{style:#}: {err:#}\n"),
            );
            ExitCode::from(Exit::Usage.code())
        }
    }
}

#[allow(clippy::print_stdout, reason = "the version is this command's output")]
fn version() {
    println!(
        "spindle {} (Spin Cycle API {})",
        env!("CARGO_PKG_VERSION"),
        proto::SPIN_CYCLE_API_VERSION
    );
}

/// The command line's definition with every subcommand's full name known, so that a
/// subcommand's help reads `Usage: spindle start`, not `Usage: start`.
fn built_command() -> clap::Command {
    let mut command = Cli::command();
    command.build();
    command
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    /// clap's own consistency checks over every command (unique names, valid defaults).
    #[test]
    fn the_command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }

    fn help_of(command: &str) -> String {
        super::built_command()
            .find_subcommand_mut(command)
            .unwrap()
            .render_long_help()
            .to_string()
    }

    /// Issue #36: `spindle help start` names the command as it is typed.
    #[test]
    fn a_commands_help_shows_its_full_usage() {
        let help = help_of("start");
        assert!(
            help.contains("Usage: spindle start [OPTIONS] <REQUEST> [ARGS]..."),
            "{help}"
        );
    }

    /// Issue #35: the client flags are shown only where they apply.
    #[test]
    fn client_flags_only_on_the_commands_that_talk_to_a_server() {
        let flags = [
            "--addr",
            "--token",
            "--ca-cert",
            "--client-cert",
            "--timeout",
        ];
        for command in ["lint", "run", "version", "completions"] {
            let help = help_of(command);
            for flag in flags {
                assert!(
                    !help.contains(flag),
                    "`{command} --help` shows {flag}:\n{help}"
                );
            }
        }
        assert!(!help_of("lint").contains("--output"));
        for command in ["status", "start", "log", "find", "watch", "approve"] {
            let help = help_of(command);
            for flag in flags {
                assert!(help.contains(flag), "`{command} --help` lacks {flag}");
            }
        }
        let graph = help_of("graph");
        assert!(
            graph.contains("only without --specs, for a stored request")
                && graph.contains("--addr"),
            "{graph}"
        );
    }

    /// Client flags given before the command still apply; the command's own win.
    #[test]
    fn client_flags_before_the_command_apply_and_the_commands_own_win() {
        use clap::Parser as _;
        let cli = super::Cli::try_parse_from([
            "spindle", "--addr", "a:1", "--output", "json", "status", "ID", "--addr", "b:2",
        ])
        .unwrap();
        let Some(super::Command::Status { client, .. }) = cli.command else {
            panic!("not status");
        };
        let merged = format!("{:?}", client.or(&cli.client));
        assert!(
            merged.contains("\"b:2\"") && merged.contains("Json"),
            "{merged}"
        );
    }
}
