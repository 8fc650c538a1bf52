//! An example job type, `greet`, registered next to Spindle's built-in ones.
//!
//! `greet` takes the job arg `name`. When the request is created it sets the arg
//! `greeting` (for nodes that declare it in `sets:`); when it runs it prints the greeting
//! and passes `greeted: <name>` on in the job data.

use job::{CreateContext, Error, Job, Outcome, Registry, RunContext};
use proto::JobArgs;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct GreetJob {
    name: String,
}

#[async_trait::async_trait]
impl Job for GreetJob {
    fn create(&mut self, args: &mut JobArgs, ctx: &CreateContext) -> Result<(), Error> {
        let Some(Value::String(name)) = args.get("name") else {
            return Err(Error::Args(
                "greet: job arg `name` is missing; expected a string".to_owned(),
            ));
        };
        self.name = name.clone();
        if ctx.sets.iter().any(|set| set == "greeting") {
            args.insert(
                "greeting".to_owned(),
                Value::String(format!("hello, {name}")),
            );
        }
        Ok(())
    }

    // Its stored state is its serde form (JSON): the macro writes `serialize` and
    // `deserialize`.
    job::json_state!();

    async fn run(&mut self, data: &mut JobArgs, ctx: RunContext) -> Outcome {
        ctx.status.set(format!("greeting {}", self.name));
        data.insert("greeted".to_owned(), Value::String(self.name.clone()));
        Outcome {
            stdout: format!("hello, {}\n", self.name),
            ..Outcome::complete()
        }
    }
}

/// Spindle's built-in job types plus `greet`.
pub fn registry() -> Registry {
    let mut registry = Registry::builtin();
    registry
        .register("greet", |_| Box::<GreetJob>::default())
        // `spindle lint` (and the servers) refuse a `greet` node that does not pass it.
        .require_args("greet", &["name"]);
    registry
}
