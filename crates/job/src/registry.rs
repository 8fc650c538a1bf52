//! The factory registry: job type name → maker.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::{Error, Factory, Job, JobId, builtin};

/// Makes one job type.
pub type Maker = Arc<dyn Fn(&JobId) -> Box<dyn Job> + Send + Sync>;

/// A [`Factory`] that knows job types by name. [`Registry::builtin`] knows Spindle's own;
/// add yours with [`Registry::register`].
#[derive(Clone, Default)]
pub struct Registry {
    makers: BTreeMap<String, Maker>,
    /// The job args each type requires (the linter checks that nodes pass them).
    required: BTreeMap<String, Vec<String>>,
    /// The job program that serves each external type (`jobs:`), as messages name it.
    pub(crate) programs: BTreeMap<String, String>,
    /// Built-in types a job program serves in their place (its `types:` names them).
    pub(crate) replaced: std::collections::BTreeSet<String>,
    /// The approval jobs its runner has waiting (shared by its clones).
    approvals: Arc<builtin::approval::Approvals>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("types", &self.makers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// The built-in types: `noop`, `sleep`, `shell-command`, `shell-args`.
    pub fn builtin() -> Registry {
        let mut registry = Registry::new();
        registry.register(builtin::NOOP, |_| Box::new(builtin::NoopJob));
        registry.register(builtin::SLEEP, |_| Box::<builtin::SleepJob>::default());
        let approvals = Arc::clone(&registry.approvals);
        registry.register(builtin::APPROVAL, move |id| {
            Box::new(builtin::approval::ApprovalJob::new(
                &id.request_id,
                &id.id,
                Arc::clone(&approvals),
            ))
        });
        registry.register(builtin::SHELL_COMMAND, |_| {
            Box::<builtin::ShellCommandJob>::default()
        });
        registry.register(builtin::SHELL_ARGS, |_| {
            Box::<builtin::ShellArgsJob>::default()
        });
        registry.require_args(builtin::SLEEP, &["duration"]);
        registry.require_args(builtin::SHELL_COMMAND, &["cmd"]);
        registry.require_args(builtin::SHELL_ARGS, &["cmd"]);
        registry
    }

    /// The approval jobs waiting on the runner that makes its jobs, and the answers kept
    /// for them.
    pub fn approvals(&self) -> &Arc<builtin::approval::Approvals> {
        &self.approvals
    }

    /// Adds (or replaces) a job type.
    pub fn register<F>(&mut self, job_type: &str, maker: F) -> &mut Registry
    where
        F: Fn(&JobId) -> Box<dyn Job> + Send + Sync + 'static,
    {
        self.makers.insert(job_type.to_owned(), Arc::new(maker));
        self
    }

    /// Declares the job args a type needs: `spindle lint` (and the servers, at start)
    /// refuse a job node of that type that does not pass them in `args`.
    pub fn require_args(&mut self, job_type: &str, args: &[&str]) -> &mut Registry {
        self.required.insert(
            job_type.to_owned(),
            args.iter().map(|arg| (*arg).to_owned()).collect(),
        );
        self
    }

    /// The job args a type declared it requires.
    pub fn required_args(&self, job_type: &str) -> &[String] {
        self.required.get(job_type).map_or(&[], Vec::as_slice)
    }

    /// The built-in types that job programs serve in their place, sorted.
    pub fn replaced_builtins(&self) -> impl Iterator<Item = &str> {
        self.replaced.iter().map(String::as_str)
    }

    pub fn contains(&self, job_type: &str) -> bool {
        self.makers.contains_key(job_type)
    }

    /// The registered type names, sorted.
    pub fn types(&self) -> impl Iterator<Item = &str> {
        self.makers.keys().map(String::as_str)
    }
}

impl Factory for Registry {
    fn make(&self, id: &JobId) -> Result<Box<dyn Job>, Error> {
        // A chain's begin and end wrapper jobs are its structure, not a team's job: they
        // stay the built-in `noop` (no bytes, as Spin Cycle's) where a program serves it.
        if id.job_type == builtin::NOOP && proto::is_wrapper(&id.name, &id.job_type) {
            return Ok(Box::new(builtin::NoopJob));
        }
        match self.makers.get(&id.job_type) {
            Some(maker) => Ok(maker(id)),
            None => Err(Error::UnknownType {
                job_type: id.job_type.clone(),
                known: self.types().collect::<Vec<_>>().join(", "),
            }),
        }
    }

    fn knows(&self, job_type: &str) -> bool {
        self.contains(job_type)
    }

    fn approvals(&self) -> Option<&Arc<builtin::approval::Approvals>> {
        Some(&self.approvals)
    }
}
