//! [`JobArgs`]: names to JSON values, as `serde_json::Map` offers them, kept in one
//! vector sorted by name.
//!
//! Every job of a chain carries two of these (`args`, `each`) and a runner a third
//! (`data`); most hold zero to a few entries. A `BTreeMap` (serde_json's `Map`) allocates
//! a whole node of eleven slots, about 630 bytes, for its first entry, which made the maps
//! most of a 100,000-job expansion's memory; a vector of exactly its entries costs 56
//! bytes an entry. Iteration and JSON keep the map's order (sorted by name), so the
//! JSON Spindle writes is unchanged. Lookups are binary searches; inserts shift the
//! entries after the new one, which is cheap at these sizes.

use std::fmt;
use std::ops::{Index, IndexMut};

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// An `each:` element as people name it (issue #50): the values of `each` that `outer`
/// (the `each` of the job its node fans out from, the elements around it) does not hold;
/// one value as it is, several as `name=value` pairs.
pub fn element_name(each: &JobArgs, outer: &JobArgs) -> String {
    let text = |value: &Value| match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let own: Vec<(&String, &Value)> = each
        .iter()
        .filter(|(name, value)| outer.get(name) != Some(*value))
        .collect();
    match own.as_slice() {
        [(_, value)] => text(value),
        _ => own
            .iter()
            .map(|(name, value)| format!("{name}={}", text(value)))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// Job args (RM side, while building the chain) and job data (JR side, at run time): a
/// map of names to arbitrary JSON values.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct JobArgs {
    /// Sorted by name, names unique.
    entries: Vec<(String, Value)>,
}

type Entry = (String, Value);

/// Iterates over a map's entries by name.
pub type Iter<'a> =
    std::iter::Map<std::slice::Iter<'a, Entry>, fn(&'a Entry) -> (&'a String, &'a Value)>;

/// Iterates over a map's entries by name, with its values changeable.
pub type IterMut<'a> = std::iter::Map<
    std::slice::IterMut<'a, Entry>,
    fn(&'a mut Entry) -> (&'a String, &'a mut Value),
>;

/// Takes a map's entries, by name.
pub type IntoIter = std::vec::IntoIter<Entry>;

impl JobArgs {
    /// An empty map (allocates nothing).
    pub fn new() -> JobArgs {
        JobArgs::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.entries
            .binary_search_by(|(name, _)| name.as_str().cmp(key))
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.find(key).ok().map(|at| &self.entries[at].1)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.find(key).ok().map(|at| &mut self.entries[at].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`; returns the value it had.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        match self.find(&key) {
            Ok(at) => Some(std::mem::replace(&mut self.entries[at].1, value)),
            Err(at) => {
                self.entries.insert(at, (key, value));
                None
            }
        }
    }

    /// The value of `key`, set to `value()` first if there is none.
    pub fn get_or_insert_with(&mut self, key: String, value: impl FnOnce() -> Value) -> &mut Value {
        let at = match self.find(&key) {
            Ok(at) => at,
            Err(at) => {
                self.entries.insert(at, (key, value()));
                at
            }
        };
        &mut self.entries[at].1
    }

    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.find(key).ok().map(|at| self.entries.remove(at).1)
    }

    /// Keeps the entries for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut Value) -> bool) {
        self.entries.retain_mut(|(name, value)| keep(name, value));
    }

    pub fn iter(&self) -> Iter<'_> {
        self.entries.iter().map(|(name, value)| (name, value))
    }

    pub fn iter_mut(&mut self) -> IterMut<'_> {
        self.entries.iter_mut().map(|(name, value)| (&*name, value))
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.entries.iter().map(|(name, _)| name)
    }

    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.entries.iter().map(|(_, value)| value)
    }

    /// Entries sorted by name, the last of equal names kept (as inserting them one by one
    /// into a map would).
    fn from_entries(mut entries: Vec<Entry>) -> JobArgs {
        // A stable sort keeps equal names in their order; of each run, the last wins.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut kept: Vec<Entry> = Vec::with_capacity(entries.len());
        for entry in entries {
            match kept.last_mut() {
                Some(last) if last.0 == entry.0 => *last = entry,
                _ => kept.push(entry),
            }
        }
        kept.shrink_to_fit();
        JobArgs { entries: kept }
    }
}

impl fmt::Debug for JobArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Index<&str> for JobArgs {
    type Output = Value;

    /// The value of `key`; panics if there is none (as `serde_json::Map` does).
    fn index(&self, key: &str) -> &Value {
        self.get(key)
            .unwrap_or_else(|| panic!("no entry named {key:?}"))
    }
}

impl Index<&String> for JobArgs {
    type Output = Value;

    fn index(&self, key: &String) -> &Value {
        &self[key.as_str()]
    }
}

impl IndexMut<&str> for JobArgs {
    fn index_mut(&mut self, key: &str) -> &mut Value {
        self.get_mut(key)
            .unwrap_or_else(|| panic!("no entry named {key:?}"))
    }
}

impl FromIterator<(String, Value)> for JobArgs {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> JobArgs {
        JobArgs::from_entries(iter.into_iter().collect())
    }
}

impl Extend<(String, Value)> for JobArgs {
    fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, iter: I) {
        for (key, value) in iter {
            self.insert(key, value);
        }
    }
}

impl IntoIterator for JobArgs {
    type Item = (String, Value);
    type IntoIter = IntoIter;

    fn into_iter(self) -> IntoIter {
        self.entries.into_iter()
    }
}

impl<'a> IntoIterator for &'a JobArgs {
    type Item = (&'a String, &'a Value);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a mut JobArgs {
    type Item = (&'a String, &'a mut Value);
    type IntoIter = IterMut<'a>;

    fn into_iter(self) -> IterMut<'a> {
        self.iter_mut()
    }
}

impl From<serde_json::Map<String, Value>> for JobArgs {
    fn from(map: serde_json::Map<String, Value>) -> JobArgs {
        // The map iterates sorted by name, names unique.
        let mut entries: Vec<Entry> = map.into_iter().collect();
        entries.shrink_to_fit();
        JobArgs { entries }
    }
}

impl From<JobArgs> for serde_json::Map<String, Value> {
    fn from(args: JobArgs) -> serde_json::Map<String, Value> {
        args.entries.into_iter().collect()
    }
}

impl From<JobArgs> for Value {
    fn from(args: JobArgs) -> Value {
        Value::Object(args.into())
    }
}

impl Serialize for JobArgs {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (name, value) in &self.entries {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for JobArgs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<JobArgs, D::Error> {
        struct Entries;

        impl<'de> Visitor<'de> for Entries {
            type Value = JobArgs;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of names to values")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<JobArgs, A::Error> {
                let mut entries = Vec::with_capacity(access.size_hint().unwrap_or(0).min(64));
                while let Some(entry) = access.next_entry::<String, Value>()? {
                    entries.push(entry);
                }
                Ok(JobArgs::from_entries(entries))
            }
        }

        deserializer.deserialize_map(Entries)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::JobArgs;

    /// An operation on a map: insert, remove, or set-if-absent, on a few names (so that
    /// they collide).
    #[derive(Debug, Clone)]
    enum Op {
        Insert(String, i64),
        Remove(String),
        SetIfAbsent(String, i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        let name = "[a-e]{1,2}";
        prop_oneof![
            (name, any::<i64>()).prop_map(|(k, v)| Op::Insert(k, v)),
            name.prop_map(Op::Remove),
            (name, any::<i64>()).prop_map(|(k, v)| Op::SetIfAbsent(k, v)),
        ]
    }

    proptest! {
        /// Whatever is done to it, the map answers, iterates and serializes as a
        /// `BTreeMap` (serde_json's `Map`) given the same operations does.
        #[test]
        fn it_behaves_as_a_sorted_map(ops in proptest::collection::vec(op(), 0..40)) {
            let mut ours = JobArgs::new();
            let mut theirs: BTreeMap<String, Value> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        prop_assert_eq!(ours.insert(k.clone(), json!(v)), theirs.insert(k, json!(v)));
                    }
                    Op::Remove(k) => prop_assert_eq!(ours.remove(&k), theirs.remove(&k)),
                    Op::SetIfAbsent(k, v) => {
                        let got = ours.get_or_insert_with(k.clone(), || json!(v)).clone();
                        prop_assert_eq!(&got, theirs.entry(k).or_insert(json!(v)));
                    }
                }
                prop_assert_eq!(ours.len(), theirs.len());
            }
            let pairs: Vec<(&String, &Value)> = ours.iter().collect();
            prop_assert_eq!(pairs, theirs.iter().collect::<Vec<_>>());
            for name in ["a", "b", "ab", "zz"] {
                prop_assert_eq!(ours.get(name), theirs.get(name));
                prop_assert_eq!(ours.contains_key(name), theirs.contains_key(name));
            }
            prop_assert_eq!(serde_json::to_string(&ours).unwrap(), serde_json::to_string(&theirs).unwrap());
        }

        /// Read from JSON with names in any order and repeated, it holds what serde_json's
        /// map would (the last of a repeated name), and writes it back the same.
        #[test]
        fn it_reads_json_as_serde_jsons_map_does(entries in proptest::collection::vec(("[a-e]{1,2}", any::<i32>()), 0..20)) {
            let text = format!(
                "{{{}}}",
                entries.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect::<Vec<_>>().join(",")
            );
            let ours: JobArgs = serde_json::from_str(&text).unwrap();
            let theirs: serde_json::Map<String, Value> = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(serde_json::to_string(&ours).unwrap(), serde_json::to_string(&theirs).unwrap());
            prop_assert_eq!(&ours, &JobArgs::from(theirs.clone()));
            prop_assert_eq!(serde_json::Map::from(ours), theirs);
        }
    }

    #[test]
    fn what_is_not_an_object_is_refused_with_what_was_expected() {
        let err = serde_json::from_str::<JobArgs>("[1, 2]").unwrap_err();
        assert!(
            err.to_string()
                .contains("expected an object of names to values"),
            "{err}"
        );
    }

    #[test]
    fn an_empty_map_allocates_nothing_and_a_full_one_only_its_entries() {
        assert_eq!(JobArgs::new().entries.capacity(), 0);
        let args: JobArgs = serde_json::from_str(r#"{"host": "db1"}"#).unwrap();
        assert_eq!(args.entries.capacity(), 1);
        assert_eq!(args["host"], json!("db1"));
    }
}
