//! The grapher: turns a request type and its args into an immutable [`JobChain`]
//! (grapher.md), calling the job factory to create and serialize every job.
//!
//! It keeps Spin Cycle's chain conventions — begin/end wrapper jobs named
//! `request_<T>_begin`, `<S>_begin`, `sequence_<node>_begin`, `conditional_<node>_begin`,
//! `repeat_<node>_begin`, `noop_<node>_begin` (and `_end`), `sequenceId` = the first job of
//! the innermost sequence, 4-character job ids — and fixes its faults: bad input is an
//! [`Error`] that lists what the request accepts, never a crash; `parallel: N` is a sliding
//! window recorded on the expansion's begin job ([`proto::Job::parallel`]) instead of
//! batches.

mod build;
pub mod elements;
mod error;
mod locks;
pub mod names;
pub mod outline;
pub mod structure;

use std::collections::HashMap;
use std::sync::Arc;

use job::Factory;
use proto::{JobArgs, JobChain, RequestArg, RequestArgType, RequestSpec};
use serde_json::Value;
use spec::{Sequence, SequenceGraph, Specs};

pub use error::Error;

/// A request as the grapher made it: its id, its recorded args and its chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    pub request_id: String,
    pub args: Vec<RequestArg>,
    pub job_chain: JobChain,
}

/// Builds job chains from specs. Made once from specs that passed the linter, then used
/// for every request.
pub struct Grapher {
    specs: Specs,
    /// Sequence graphs of the sequences whose deps form a DAG.
    graphs: HashMap<String, SequenceGraph>,
    factory: Arc<dyn Factory>,
}

impl std::fmt::Debug for Grapher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grapher")
            .field("sequences", &self.specs.len())
            .finish_non_exhaustive()
    }
}

/// A new request id: 20 characters, unique and ordered by time (xid).
pub fn new_request_id() -> String {
    xid::new().to_string()
}

impl Grapher {
    /// A grapher for `specs`, which should have passed [`spec::lint`] without errors.
    pub fn new(specs: Specs, factory: Arc<dyn Factory>) -> Grapher {
        let graphs = specs
            .sequences()
            .iter()
            .filter_map(|seq| Some((seq.name.clone(), SequenceGraph::new(seq)?)))
            .collect();
        Grapher {
            specs,
            graphs,
            factory,
        }
    }

    pub fn specs(&self) -> &Specs {
        &self.specs
    }

    /// The request types with their args, sorted by name (`GET /api/v1/request-list`):
    /// required args first, then optional ones, each in spec order; static args are not
    /// listed.
    pub fn request_specs(&self) -> Vec<RequestSpec> {
        self.specs
            .requests()
            .into_iter()
            .map(|seq| RequestSpec {
                name: seq.name.clone(),
                args: seq
                    .args
                    .all()
                    .filter(|(kind, _)| *kind != RequestArgType::Static)
                    .filter_map(|(kind, arg)| {
                        Some(RequestArg {
                            pos: 0,
                            name: arg.name()?.to_owned(),
                            desc: arg.desc.clone(),
                            arg_type: kind,
                            given: false,
                            default: arg
                                .default
                                .as_ref()
                                .map_or(Value::Null, |d| d.value.clone()),
                            value: Value::Null,
                            secret: arg.secret,
                        })
                    })
                    .collect(),
            })
            .collect()
    }

    /// Builds the chain of a new request with a new request id.
    pub fn create(&self, request_type: &str, args: &JobArgs) -> Result<Created, Error> {
        self.create_with_id(&new_request_id(), request_type, args)
    }

    /// Builds the chain of a request whose id is given.
    pub fn create_with_id(
        &self,
        request_id: &str,
        request_type: &str,
        args: &JobArgs,
    ) -> Result<Created, Error> {
        let (seq, recorded) = self.request_args(request_type, args)?;
        // The top-level job args: the caller's args plus the defaults of the others.
        let mut job_args = args.clone();
        for (name, value) in recorded.iter().map(|arg| (&arg.name, &arg.value)) {
            job_args.get_or_insert_with(name.clone(), || value.clone());
        }
        let job_chain = build::build_chain(self, request_id, &seq.name, job_args)?;
        Ok(Created {
            request_id: request_id.to_owned(),
            args: recorded,
            job_chain,
        })
    }

    /// Checks the caller's args against the request's declaration and records them.
    fn request_args(
        &self,
        request_type: &str,
        args: &JobArgs,
    ) -> Result<(&Sequence, Vec<RequestArg>), Error> {
        if request_type.is_empty() {
            return Err(Error::EmptyType);
        }
        let known = || {
            self.specs
                .requests()
                .iter()
                .map(|s| s.name.clone())
                .collect::<Vec<_>>()
        };
        let Some(seq) = self.specs.get(request_type) else {
            return Err(Error::UnknownRequest {
                name: request_type.to_owned(),
                known: known(),
            });
        };
        if !seq.request {
            return Err(Error::NotARequest {
                name: request_type.to_owned(),
                known: known(),
            });
        }
        let mut problems = Vec::new();
        let mut recorded = Vec::new();
        let mut positions: HashMap<RequestArgType, u32> = HashMap::new();
        for (kind, decl) in seq.args.all() {
            let Some(name) = decl.name() else { continue };
            let pos = positions.entry(kind).or_insert(0);
            let default = decl.default.as_ref().map(|d| d.value.clone());
            let given = args.get(name);
            let (value, is_given) = match (kind, given) {
                (RequestArgType::Required, Some(value)) => (value.clone(), true),
                (RequestArgType::Required, None) => {
                    problems.push(format!("missing required arg `{name}`"));
                    (Value::Null, false)
                }
                (RequestArgType::Optional, Some(value)) => (value.clone(), true),
                (RequestArgType::Optional, None) => (default.clone().unwrap_or(Value::Null), false),
                (RequestArgType::Static, Some(_)) => {
                    problems.push(format!(
                        "`{name}` is a static arg, fixed by the spec; it cannot be given"
                    ));
                    (default.clone().unwrap_or(Value::Null), false)
                }
                (RequestArgType::Static, None) => (default.clone().unwrap_or(Value::Null), false),
            };
            recorded.push(RequestArg {
                pos: *pos,
                name: name.to_owned(),
                desc: decl.desc.clone(),
                arg_type: kind,
                given: is_given,
                default: if kind == RequestArgType::Optional {
                    default.unwrap_or(Value::Null)
                } else {
                    Value::Null
                },
                value,
                secret: decl.secret,
            });
            *pos += 1;
        }
        for name in args.keys() {
            if !seq.arg_names().any(|declared| declared == name) {
                problems.push(format!(
                    "`{name}` is not an arg of request `{request_type}`{}",
                    spec::near::did_you_mean(name, seq.arg_names())
                ));
            }
        }
        if !problems.is_empty() {
            return Err(Error::Args {
                request: request_type.to_owned(),
                problems,
                accepts: accepts(seq),
            });
        }
        Ok((seq, recorded))
    }
}

/// What a request accepts, for error messages: `host (required), force (optional,
/// default "no")`.
fn accepts(seq: &Sequence) -> String {
    let parts: Vec<String> = seq
        .args
        .all()
        .filter(|(kind, _)| *kind != RequestArgType::Static)
        .filter_map(|(kind, arg)| {
            let name = arg.name()?;
            let mut text = format!("{name} ({kind}");
            if let Some(default) = &arg.default {
                text.push_str(&format!(", default {}", default.value));
            }
            text.push(')');
            if !arg.desc.is_empty() {
                text.push_str(&format!(": {}", arg.desc));
            }
            Some(text)
        })
        .collect();
    if parts.is_empty() {
        "no args".to_owned()
    } else {
        parts.join("; ")
    }
}

#[cfg(test)]
mod lock_tests;
#[cfg(test)]
mod tests;
