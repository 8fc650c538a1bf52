//! `spindle graph`: builds a request's job chain from specs and prints it without running
//! anything.

use std::io::{IsTerminal as _, Write};
use std::path::PathBuf;
use std::sync::Arc;

use job::{CreateContext, Factory, Job, JobId, Outcome, Registry, RunContext};
use proto::JobArgs;
use serde_json::Value;

use crate::args::parse_request_args;
use crate::client::dot::{GraphFormat, print_chain};
use crate::exit::Exit;

/// The job factory of `spindle graph`: the registry's, except that `shell-args` jobs
/// (which run a program to create themselves) are placeholders unless
/// `--run-shell-args`, and with `--preview` so are job types this binary does not know.
struct GraphFactory {
    registry: Registry,
    preview: bool,
    run_shell_args: bool,
}

/// A job shown without being created for real. It sets each arg its node declares in
/// `sets` to a one-element list describing the value, so that expansions over it appear
/// once. Its chain is for looking at, not for running.
struct PreviewJob {
    job_type: String,
    /// When the real job would set its args: "at run time", "at create time".
    when: &'static str,
}

#[async_trait::async_trait]
impl Job for PreviewJob {
    fn create(&mut self, args: &mut JobArgs, ctx: &CreateContext) -> Result<(), job::Error> {
        for name in &ctx.sets {
            let text = format!("<{name}: set by a {} job {}>", self.job_type, self.when);
            args.insert(name.clone(), Value::Array(vec![Value::String(text)]));
        }
        Ok(())
    }

    job::no_state!();

    async fn run(&mut self, _data: &mut JobArgs, _ctx: RunContext) -> Outcome {
        Outcome::failed(format!(
            "job type `{}` is a preview placeholder and cannot run",
            self.job_type
        ))
    }
}

/// The built-in job type that runs a program when its request is created.
const SHELL_ARGS: &str = "shell-args";

impl Factory for GraphFactory {
    fn make(&self, id: &JobId) -> Result<Box<dyn Job>, job::Error> {
        if id.job_type == SHELL_ARGS && !self.run_shell_args {
            return Ok(Box::new(PreviewJob {
                job_type: id.job_type.clone(),
                when: "computed at create time",
            }));
        }
        if self.preview && !self.registry.contains(&id.job_type) {
            return Ok(Box::new(PreviewJob {
                job_type: id.job_type.clone(),
                when: "at run time",
            }));
        }
        self.registry.make(id)
    }
}

pub(crate) fn run(
    args: &GraphArgs,
    registry: Registry,
    client: &crate::client::spinc::ClientArgs,
) -> anyhow::Result<Exit> {
    let format = args.format.unwrap_or_else(|| {
        if std::io::stdout().is_terminal() {
            GraphFormat::Tree
        } else {
            GraphFormat::Json
        }
    });
    let Some(specs) = &args.specs else {
        return crate::exit::block_on(crate::client::spinc::stored_graph(
            client,
            &args.request,
            format,
        ));
    };
    let request_args = parse_request_args(&args.args)?;
    let registry = crate::service::programs::with_config(registry, args.config.as_deref())?;
    // With --preview, job types this binary does not know are shown, not refused.
    let checked = (!args.preview).then_some(&registry);
    let Some(specs_read) = crate::service::lint::load_specs(specs, checked)? else {
        crate::exit::eprintln_failure(&format!(
            "the specs in {} have errors; fix them first (`spindle lint {}` lists them)",
            specs.display(),
            specs.display()
        ));
        // Only their job types are wrong: they may be written for another binary.
        if checked.is_some() && !spec::lint(std::slice::from_ref(specs))?.has_errors() {
            let mut stderr = anstream::stderr().lock();
            writeln!(
                stderr,
                "hint: `--preview` shows job types this binary does not know as placeholders"
            )?;
        }
        return Ok(Exit::Failure);
    };
    let factory: Arc<dyn Factory> = Arc::new(GraphFactory {
        registry,
        preview: args.preview,
        run_shell_args: args.run_shell_args,
    });
    let grapher = graph::Grapher::new(specs_read, factory);
    let created = match grapher.create(&args.request, &request_args) {
        Ok(created) => created,
        Err(err) => {
            let mut stderr = anstream::stderr().lock();
            writeln!(stderr, "error: {err}")?;
            if let graph::Error::Job { source, .. } = &err
                && matches!(**source, job::Error::UnknownType { .. })
            {
                writeln!(
                    stderr,
                    "hint: `--preview` shows job types this binary does not know as placeholders"
                )?;
            }
            return Ok(Exit::Failure);
        }
    };
    print_chain(&created.job_chain, format)?;
    Ok(Exit::Success)
}

#[derive(Debug, clap::Args)]
pub(crate) struct GraphArgs {
    /// Directory (or file) of request specs to build the chain from; without it,
    /// REQUEST is the id of a stored request, whose chain is printed with each job's state
    /// (only the flag chooses: an exported SPINDLE_SPECS, meant for the servers, does not)
    #[arg(long)]
    pub(crate) specs: Option<PathBuf>,
    /// The request type to build (or, without --specs, a request id)
    pub(crate) request: String,
    /// Request args as name=value; a value that is a JSON list or object (hosts=["a","b"])
    /// is passed as that value, anything else as a string; name=@FILE reads it from a file
    /// (one value a line, or a JSON list)
    pub(crate) args: Vec<String>,
    /// Output format [default: tree on a terminal, otherwise json]
    #[arg(long, value_enum)]
    pub(crate) format: Option<GraphFormat>,
    /// Show job types this binary does not know as placeholders (the chain is for looking
    /// at, not for running)
    #[arg(long)]
    pub(crate) preview: bool,
    /// Run the programs of `shell-args` jobs, as creating the request would; without it
    /// they are not run and what they set shows as "computed at create time"
    #[arg(long)]
    pub(crate) run_shell_args: bool,
    /// A config file whose job programs (`jobs:`) serve job types besides this binary's;
    /// their `create` runs, as creating the request would
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Options for a stored request (without --specs): where its server is
    #[command(
        flatten,
        next_help_heading = "Server (only without --specs, for a stored request)"
    )]
    pub(crate) client: crate::client::spinc::ClientArgs,
}
