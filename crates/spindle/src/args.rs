//! Request args on the command line (`name=value`), as `graph`, `run` and `start` read
//! them; a fleet's list from a file (`hosts=@hosts.txt`), since one argument past
//! 128 KiB cannot be passed at all.

use std::path::Path;

use anyhow::Context as _;
use proto::JobArgs;
use serde_json::Value;

/// Parses `name=value` request args: a value that reads as a JSON list or object is that
/// value, anything else is a string. A value `@PATH` is read from that file (`@-`: from
/// standard input): a JSON list or object when its text starts like one, else a list
/// of its lines (each trimmed, blank ones left out). `@@…` is the literal value `@…`.
pub(crate) fn parse_request_args(pairs: &[String]) -> anyhow::Result<JobArgs> {
    let mut args = JobArgs::new();
    for pair in pairs {
        let Some((name, value)) = pair.split_once('=') else {
            anyhow::bail!("request arg {pair:?} is not of the form name=value");
        };
        if name.is_empty() {
            anyhow::bail!("request arg {pair:?} has no name; expected name=value");
        }
        let parsed = if let Some(literal) = value.strip_prefix("@@") {
            Value::String(format!("@{literal}"))
        } else if let Some(path) = value.strip_prefix('@') {
            from_file(name, path)?
        } else {
            inline(name, value)?
        };
        args.insert(name.to_owned(), parsed);
    }
    Ok(args)
}

/// A value given on the command line.
fn inline(name: &str, value: &str) -> anyhow::Result<Value> {
    let trimmed = value.trim_start();
    if trimmed.starts_with('[') || trimmed.starts_with('{') {
        serde_json::from_str::<Value>(value).with_context(|| {
            format!("request arg `{name}`: {value:?} starts like JSON but is not valid JSON")
        })
    } else {
        Ok(Value::String(value.to_owned()))
    }
}

/// A value read from the file at `path` (`-`: standard input).
fn from_file(name: &str, path: &str) -> anyhow::Result<Value> {
    if path.is_empty() {
        anyhow::bail!(
            "request arg `{name}`: `@` names no file; expected {name}=@PATH (a file of one value a line, or a JSON list), or {name}=@@… for a value that begins with @"
        );
    }
    let text = if path == "-" {
        std::io::read_to_string(std::io::stdin())
            .with_context(|| format!("request arg `{name}`: reading standard input (@-)"))?
    } else {
        std::fs::read_to_string(Path::new(path)).with_context(|| {
            format!(
                "request arg `{name}`: reading {path} (a value that begins with @ names a file; write @@ for a literal @)"
            )
        })?
    };
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('[') || trimmed.starts_with('{') {
        return serde_json::from_str::<Value>(trimmed).with_context(|| {
            format!("request arg `{name}`: {path} starts like JSON but is not valid JSON")
        });
    }
    Ok(Value::Array(
        text.lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .map(|line| Value::String(line.to_owned()))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[&str]) -> anyhow::Result<JobArgs> {
        parse_request_args(&pairs.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn inline_values_are_strings_or_json() {
        let args = parse(&["host=web-1", "hosts=[\"a\",\"b\"]", "note= plain"]).unwrap();
        assert_eq!(args["host"], "web-1");
        assert_eq!(args["hosts"], serde_json::json!(["a", "b"]));
        assert_eq!(args["note"], " plain");
        let err = parse(&["hosts=[a"]).unwrap_err();
        assert!(format!("{err:#}").contains("`hosts`"), "{err:#}");
        assert!(parse(&["nothing"]).is_err());
        assert!(parse(&["=x"]).is_err());
    }

    #[test]
    fn a_value_from_a_file_is_its_lines_or_its_json() {
        let dir = tempfile::tempdir().unwrap();
        let lines = dir.path().join("hosts.txt");
        std::fs::write(&lines, "web-01\r\n  web-02  \n\n# not a comment\nweb-03").unwrap();
        let json = dir.path().join("hosts.json");
        std::fs::write(&json, "\n  [\"db-1\", {\"name\": \"db-2\"}]\n").unwrap();
        let args = parse(&[
            &format!("hosts=@{}", lines.display()),
            &format!("dbs=@{}", json.display()),
            "team=@@sre",
        ])
        .unwrap();
        assert_eq!(
            args["hosts"],
            serde_json::json!(["web-01", "web-02", "# not a comment", "web-03"])
        );
        assert_eq!(args["dbs"], serde_json::json!(["db-1", {"name": "db-2"}]));
        assert_eq!(args["team"], "@sre");
    }

    #[test]
    fn a_file_that_cannot_be_read_or_is_not_json_says_which() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.txt");
        let err = parse(&[&format!("hosts=@{}", missing.display())]).unwrap_err();
        let said = format!("{err:#}");
        assert!(said.contains("request arg `hosts`"), "{said}");
        assert!(said.contains(&missing.display().to_string()), "{said}");
        assert!(said.contains("write @@ for a literal @"), "{said}");
        let broken = dir.path().join("broken.json");
        std::fs::write(&broken, "[\"a\",\n  \"b\"").unwrap();
        let said = format!(
            "{:#}",
            parse(&[&format!("hosts=@{}", broken.display())]).unwrap_err()
        );
        assert!(said.contains("not valid JSON"), "{said}");
        assert!(said.contains("line 2"), "{said}");
        let said = format!("{:#}", parse(&["hosts=@"]).unwrap_err());
        assert!(said.contains("names no file"), "{said}");
    }
}
