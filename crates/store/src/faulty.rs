//! A [`Store`] for other crates' tests (feature `testing`): another store's operations,
//! but for those a test tells to fail, which fail as if the database had gone away
//! ([`Error::Unavailable`]) before doing anything. What a caller does with a store error
//! at one exact step is thereby testable on the embedded database.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::{Error, Store};

/// `inner`, with the operations [`Faulty::fail`] names failing.
/// Its impls of the store's traits are written with the traits ([`crate::operations`]).
pub struct Faulty {
    pub(crate) inner: Arc<dyn Store>,
    /// Operation name → how many more calls succeed before every one fails.
    failing: Mutex<HashMap<&'static str, u32>>,
    /// Operation name → how many times it was called.
    calls: Mutex<HashMap<&'static str, u32>>,
    /// Operation name → how many more calls fail as a deadlock's victim.
    deadlocks: Mutex<HashMap<&'static str, u32>>,
}

impl std::fmt::Debug for Faulty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faulty")
            .field("failing", &self.failing)
            .field("calls", &self.calls)
            .finish_non_exhaustive()
    }
}

impl Faulty {
    pub fn new(inner: Arc<dyn Store>) -> Arc<Faulty> {
        Arc::new(Faulty {
            inner,
            failing: Mutex::new(HashMap::new()),
            calls: Mutex::new(HashMap::new()),
            deadlocks: Mutex::new(HashMap::new()),
        })
    }

    /// After `after` more calls, every call of `operation` (a [`Store`] method's name)
    /// fails, until [`Faulty::heal`].
    pub fn fail(&self, operation: &'static str, after: u32) {
        self.failing().insert(operation, after);
    }

    /// The next `times` calls of `operation` fail as the database fails a deadlock's
    /// victim ([`Error::is_deadlock`]), having done nothing.
    pub fn deadlock(&self, operation: &'static str, times: u32) {
        self.deadlocks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(operation, times);
    }

    /// `operation` works again.
    pub fn heal(&self, operation: &'static str) {
        self.failing().remove(operation);
    }

    /// How many times `operation` was called (failed calls too).
    pub fn calls(&self, operation: &'static str) -> u32 {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(operation)
            .copied()
            .unwrap_or(0)
    }

    fn failing(&self) -> std::sync::MutexGuard<'_, HashMap<&'static str, u32>> {
        self.failing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn check(&self, operation: &'static str) -> Result<(), Error> {
        *self
            .calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(operation)
            .or_default() += 1;
        if let Some(left) = self
            .deadlocks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_mut(operation)
            .filter(|left| **left > 0)
        {
            *left -= 1;
            return Err(Error::from(sqlx::Error::Database(Box::new(Deadlock))).during(operation));
        }
        match self.failing().get_mut(operation) {
            None => Ok(()),
            Some(0) => Err(Error::unreachable("the test took the database away").during(operation)),
            Some(left) => {
                *left -= 1;
                Ok(())
            }
        }
    }
}

/// What PostgreSQL answers a deadlock's victim.
#[derive(Debug)]
struct Deadlock;

impl std::fmt::Display for Deadlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadlock detected (a test's)")
    }
}

impl std::error::Error for Deadlock {}

impl sqlx::error::DatabaseError for Deadlock {
    fn message(&self) -> &str {
        "deadlock detected (a test's)"
    }

    fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
        Some("40P01".into())
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> sqlx::error::ErrorKind {
        sqlx::error::ErrorKind::Other
    }
}
