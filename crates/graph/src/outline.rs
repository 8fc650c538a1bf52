//! What a view of a chain reads of it ([`crate::structure::Structure`]'s input): each
//! job's id, name, type, retries, sequence, `each:` element and fan-out facts, and the
//! edges. Taken from a [`JobChain`], or read straight from a stored chain's JSON without
//! the jobs' args, data and serialized bytes: the web UI's page of a 100,000-job request
//! reads a third of what the whole chain would take.

use std::collections::BTreeMap;

use proto::{JobArgs, JobChain, null_as_default};
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;

/// A chain's jobs (sorted by id) and its edges.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outline {
    #[serde(default, deserialize_with = "jobs_sorted")]
    pub jobs: Vec<OutlineJob>,
    /// Job id to the ids of the jobs that run after it, as the chain has it.
    #[serde(default, deserialize_with = "null_as_default")]
    pub adjacency_list: BTreeMap<String, Vec<String>>,
}

/// One job as a view shows it (a [`proto::Job`]'s fields of the same names).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutlineJob {
    pub id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(rename = "type", default, deserialize_with = "null_as_default")]
    pub job_type: String,
    #[serde(default)]
    pub retry: u32,
    #[serde(default, deserialize_with = "null_as_default")]
    pub retry_wait: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub sequence_id: String,
    #[serde(default)]
    pub sequence_retry: u32,
    #[serde(default, deserialize_with = "null_as_default")]
    pub each: Each,
    #[serde(default)]
    pub elements: Option<Fanout>,
}

/// Of a job's [`proto::Elements`], what places it in its node's waves.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Fanout {
    /// The node's `repeat_<node>_begin`.
    pub budget: String,
    #[serde(default)]
    pub wave: u32,
}

/// A job's `each:` element: names and values, sorted by name. A list, not a map: a map
/// of one entry takes a whole B-tree node (about 600 bytes), at every job of a fan-out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Each(Vec<(String, Value)>);

impl Each {
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `name=value` pairs, strings unquoted, joined with `sep`.
    pub fn text(&self, sep: &str) -> String {
        self.own_text(None, sep)
    }

    /// [`Self::text`] of the pairs this element has that `outer` does not.
    pub fn own_text(&self, outer: Option<&Each>, sep: &str) -> String {
        crate::structure::pairs_text(
            self.0
                .iter()
                .filter(|(name, value)| outer.and_then(|each| each.get(name)) != Some(value))
                .map(|(name, value)| (name.as_str(), value)),
            sep,
        )
    }

    pub fn to_args(&self) -> JobArgs {
        self.0.iter().cloned().collect()
    }
}

impl From<&JobArgs> for Each {
    fn from(args: &JobArgs) -> Each {
        Each(args.iter().map(|(n, v)| (n.clone(), v.clone())).collect())
    }
}

impl<'de> Deserialize<'de> for Each {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Each, D::Error> {
        struct Pairs;
        impl<'de> Visitor<'de> for Pairs {
            type Value = Each;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of each: element names and values")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Each, M::Error> {
                let mut pairs: Vec<(String, Value)> =
                    Vec::with_capacity(map.size_hint().unwrap_or(1));
                while let Some(pair) = map.next_entry()? {
                    pairs.push(pair);
                }
                pairs.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(Each(pairs))
            }
        }
        deserializer.deserialize_map(Pairs)
    }
}

impl Outline {
    /// The outline of a chain's JSON as stored (Spin Cycle's `JobChain` shape).
    pub fn from_json(text: &str) -> Result<Outline, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn of(chain: &JobChain) -> Outline {
        Outline {
            // The chain's map keeps its ids sorted; a job is known by its key, as in
            // the JSON read above.
            jobs: chain
                .jobs
                .iter()
                .map(|(id, job)| OutlineJob {
                    id: id.clone(),
                    name: job.name.clone(),
                    job_type: job.job_type.clone(),
                    retry: job.retry,
                    retry_wait: job.retry_wait.clone(),
                    sequence_id: job.sequence_id.clone(),
                    sequence_retry: job.sequence_retry,
                    each: Each::from(&job.each),
                    elements: job.elements.as_ref().map(|elements| Fanout {
                        budget: elements.budget.clone(),
                        wave: elements.wave,
                    }),
                })
                .collect(),
            adjacency_list: chain.adjacency_list.clone(),
        }
    }
}

/// The chain's `jobs` object (id to job) as a list sorted by id; each job's id is its key.
fn jobs_sorted<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<OutlineJob>, D::Error> {
    struct Jobs;
    impl<'de> Visitor<'de> for Jobs {
        type Value = Vec<OutlineJob>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object of jobs by id, or null")
        }
        fn visit_unit<E>(self) -> Result<Vec<OutlineJob>, E> {
            Ok(Vec::new())
        }
        fn visit_none<E>(self) -> Result<Vec<OutlineJob>, E> {
            Ok(Vec::new())
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Vec<OutlineJob>, D::Error> {
            d.deserialize_map(Jobs)
        }
        fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Vec<OutlineJob>, M::Error> {
            let mut jobs: Vec<OutlineJob> = Vec::with_capacity(map.size_hint().unwrap_or(0));
            while let Some((id, mut job)) = map.next_entry::<String, OutlineJob>()? {
                job.id = id;
                jobs.push(job);
            }
            jobs.sort_by(|a, b| a.id.cmp(&b.id));
            jobs.dedup_by(|b, a| a.id == b.id);
            Ok(jobs)
        }
    }
    deserializer.deserialize_option(Jobs)
}
