//! Why a request could not be created.

/// A request that cannot be built. [`Error::is_input`] tells the caller's mistakes (HTTP
/// 400) from faults of the specs, the jobs or Spindle (HTTP 500).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("Type is empty, must be a request name")]
    EmptyType,
    #[error(
        "unknown request type `{name}`{}; expected one of: {}",
        spec::near::did_you_mean(name, known.iter().map(String::as_str)),
        list(known)
    )]
    UnknownRequest { name: String, known: Vec<String> },
    #[error(
        "`{name}` is a sequence but not a request (it has no `request: true`); expected one of: {}",
        list(known)
    )]
    NotARequest { name: String, known: Vec<String> },
    #[error("invalid args for request `{request}`: {}; it takes: {accepts}", problems.join("; "))]
    Args {
        request: String,
        problems: Vec<String>,
        accepts: String,
    },
    /// An arg value does not fit how the spec uses it (an `each:` list that is not a list,
    /// a conditional value with no branch, ...).
    #[error("in sequence `{sequence}`, node `{node}`: {message}")]
    Value {
        sequence: String,
        node: String,
        message: String,
    },
    /// The job factory refused to make, create or serialize a job.
    #[error(
        "in sequence `{sequence}`, node `{node}`: cannot build job `{job_name}` of type `{job_type}`: {source}"
    )]
    Job {
        sequence: String,
        node: String,
        job_name: String,
        job_type: String,
        #[source]
        source: Box<job::Error>,
    },
    /// The specs do not allow building (they did not pass the linter).
    #[error("sequence `{sequence}` cannot be built: {message}")]
    Spec { sequence: String, message: String },
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "(no request types are defined)".to_owned()
    } else {
        names.join(", ")
    }
}

impl Error {
    /// Whether the caller can fix it by sending other input.
    pub fn is_input(&self) -> bool {
        match self {
            Error::EmptyType
            | Error::UnknownRequest { .. }
            | Error::NotARequest { .. }
            | Error::Args { .. }
            | Error::Value { .. } => true,
            // A job that rejects its args (or whose create-time program fails on them) is
            // usually the caller's input too.
            Error::Job { source, .. } => {
                matches!(**source, job::Error::Args(_) | job::Error::Create(_))
            }
            Error::Spec { .. } => false,
        }
    }
}
