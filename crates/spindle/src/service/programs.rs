//! Job programs (`jobs:` in the config file): the job types they serve are added to the
//! binary's own before the specs are checked, so that `spindle lint`, `spindle run` and
//! the servers know them and the args they require.

use std::path::Path;

use anyhow::Context as _;
use job::Registry;
use job::external::ProgramConfig;

use super::config::FileConfig;

/// Adds every program's job types to `registry`; an error names the program.
pub(crate) fn add(registry: &mut Registry, jobs: &[ProgramConfig]) -> anyhow::Result<()> {
    for (index, program) in jobs.iter().enumerate() {
        let types = registry
            .add_program(program)
            .with_context(|| format!("jobs[{index}]"))?;
        tracing::debug!(program = %program.program.display(), ?types, "job program added");
    }
    let replaced: Vec<&str> = registry.replaced_builtins().collect();
    if !replaced.is_empty() {
        tracing::info!(
            replaced = replaced.join(", "),
            "job programs serve these built-in job types in the built-ins' place (their `types:` name them); chains' begin and end jobs stay the built-in noop"
        );
    }
    Ok(())
}

/// `registry` with the job programs of the config file at `config`, if any (the
/// commands that run no server read only its `jobs:`).
pub(crate) fn with_config(
    mut registry: Registry,
    config: Option<&Path>,
) -> anyhow::Result<Registry> {
    if let Some(path) = config {
        let file = FileConfig::read(path)?;
        add(&mut registry, file.jobs.as_deref().unwrap_or_default())
            .with_context(|| format!("config file {}", path.display()))?;
    }
    Ok(registry)
}
