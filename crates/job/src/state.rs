//! A job's stored bytes in the two common forms: its serde form as JSON, or nothing.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Error;

/// `value` as the JSON bytes a chain stores.
pub fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(value).map_err(|err| Error::Serialize(err.to_string()))
}

/// A value read back from the JSON bytes [`to_json`] wrote.
pub fn from_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(bytes).map_err(|err| Error::Deserialize(err.to_string()))
}

/// Writes [`Job::serialize`](crate::Job::serialize) and
/// [`Job::deserialize`](crate::Job::deserialize) of a job whose whole state is its serde
/// form: inside `impl Job for T`, where `T: Serialize + DeserializeOwned`.
#[macro_export]
macro_rules! json_state {
    () => {
        fn serialize(&self) -> Result<Vec<u8>, $crate::Error> {
            $crate::to_json(self)
        }

        fn deserialize(&mut self, bytes: &[u8]) -> Result<(), $crate::Error> {
            *self = $crate::from_json(bytes)?;
            Ok(())
        }
    };
}

/// Writes [`Job::serialize`](crate::Job::serialize) and
/// [`Job::deserialize`](crate::Job::deserialize) of a job that keeps nothing between the
/// Request Manager and the Job Runner: no bytes.
#[macro_export]
macro_rules! no_state {
    () => {
        fn serialize(&self) -> Result<Vec<u8>, $crate::Error> {
            Ok(Vec::new())
        }

        fn deserialize(&mut self, _bytes: &[u8]) -> Result<(), $crate::Error> {
            Ok(())
        }
    };
}
