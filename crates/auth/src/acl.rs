//! The specs' ACLs, by sequence name (config-auth.md §6.2).

use std::collections::HashMap;

/// One `acl:` entry of a sequence: a role and the ops it grants (or all, as admin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclEntry {
    pub role: String,
    pub admin: bool,
    pub ops: Vec<String>,
}

/// Every sequence's ACL entries, in spec order (an empty list for a sequence without).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acls(HashMap<String, Vec<AclEntry>>);

impl Acls {
    pub fn new(by_sequence: HashMap<String, Vec<AclEntry>>) -> Acls {
        Acls(by_sequence)
    }

    /// The entries of `sequence`; `None` when no such sequence is defined.
    pub fn get(&self, sequence: &str) -> Option<&[AclEntry]> {
        self.0.get(sequence).map(Vec::as_slice)
    }
}
