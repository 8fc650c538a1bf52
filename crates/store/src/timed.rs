//! A [`Store`] that times every operation of another and tells a [`QueryObserver`]
//! (the metrics): one decorator, so neither backend carries timing code.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use proto::{
    AuditEvent, CreateRequest, Fence, FinishRequest, JobChain, JobLog, JobRunner, OutputChunk,
    OutputQuery, Request, RequestFilter, RequestId, RunnerRegistration, SpecVersion, State,
    SuspendedJobChain, TryStart,
};

use crate::{
    BatchWritten, Error, Finished, Holder, ImportedRequest, JobState, LockClaim, LockHolder,
    LockTake, Owner, Removed, StartedTry, Store, WriteBatch,
};

/// Told how long each store operation took, by the operation's name (the [`Store`]
/// method's), and whether it succeeded.
pub trait QueryObserver: Send + Sync + 'static {
    fn query(&self, operation: &'static str, elapsed: Duration, ok: bool);
}

/// `inner`, with every operation timed for `observer`.
pub fn timed(inner: Arc<dyn Store>, observer: Arc<dyn QueryObserver>) -> Arc<dyn Store> {
    Arc::new(Timed { inner, observer })
}

struct Timed {
    inner: Arc<dyn Store>,
    observer: Arc<dyn QueryObserver>,
}

/// Implements every method of [`Store`] as the inner store's, timed. The signatures
/// are the trait's: the compiler checks that the list is whole and right.
macro_rules! timed_store {
    ($( fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty; )*) => {
        #[async_trait::async_trait]
        impl Store for Timed {
            $(
                async fn $name(&self $(, $arg: $ty)*) -> Result<$ret, Error> {
                    let started = Instant::now();
                    let res = self.inner.$name($($arg),*).await;
                    self.observer.query(stringify!($name), started.elapsed(), res.is_ok());
                    res
                }
            )*
        }
    };
}

store_operations!(timed_store);
