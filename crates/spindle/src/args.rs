//! Request args on the command line (`name=value`), as `graph`, `run` and `start` read
//! them.

use anyhow::Context as _;
use proto::JobArgs;
use serde_json::Value;

/// Parses `name=value` request args: a value that reads as a JSON list or object is that
/// value, anything else is a string.
pub(crate) fn parse_request_args(pairs: &[String]) -> anyhow::Result<JobArgs> {
    let mut args = JobArgs::new();
    for pair in pairs {
        let Some((name, value)) = pair.split_once('=') else {
            anyhow::bail!("request arg {pair:?} is not of the form name=value");
        };
        if name.is_empty() {
            anyhow::bail!("request arg {pair:?} has no name; expected name=value");
        }
        let trimmed = value.trim_start();
        let parsed = if trimmed.starts_with('[') || trimmed.starts_with('{') {
            serde_json::from_str::<Value>(value).with_context(|| {
                format!("request arg `{name}`: {value:?} starts like JSON but is not valid JSON")
            })?
        } else {
            Value::String(value.to_owned())
        };
        args.insert(name.to_owned(), parsed);
    }
    Ok(args)
}
