//! A [`Store`] that times every operation of another and tells a [`QueryObserver`]
//! (the metrics): one decorator, so neither backend carries timing code.

use std::sync::Arc;
use std::time::Duration;

use crate::Store;

/// Told how long each store operation took, by the operation's name (the [`Store`]
/// method's), and whether it succeeded.
pub trait QueryObserver: Send + Sync + 'static {
    fn query(&self, operation: &'static str, elapsed: Duration, ok: bool);
}

/// `inner`, with every operation timed for `observer`.
pub fn timed(inner: Arc<dyn Store>, observer: Arc<dyn QueryObserver>) -> Arc<dyn Store> {
    Arc::new(Timed { inner, observer })
}

/// Its impls of the store's traits are written with the traits ([`crate::operations`]).
pub(crate) struct Timed {
    pub(crate) inner: Arc<dyn Store>,
    pub(crate) observer: Arc<dyn QueryObserver>,
}
