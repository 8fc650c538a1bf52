//! Secret args (issue #33): at create, each arg its request type declares `secret: true`,
//! or that names a secret source (`{"secret": "NAME"}`), is taken out of the args (they
//! and the chain hold a placeholder), encrypted, and stored with the request; at every
//! hand-over the values are opened and sent to the Job Runner with the chain, which gives
//! them to jobs in their environment only and masks them in what jobs print.

use super::*;
use crate::secrets::SecretArgs;

impl Manager {
    /// The config's `secrets:`.
    pub fn set_secret_args(&self, secrets: SecretArgs) {
        *self
            .secret_args
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(secrets);
    }

    fn secret_args(&self) -> Arc<SecretArgs> {
        self.secret_args
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The names of the args `request_type` declares secret in `grapher`'s specs.
    fn declared_secret(grapher: &Grapher, request_type: &str) -> Vec<String> {
        grapher
            .specs()
            .sequences()
            .iter()
            .filter(|sequence| sequence.name == request_type)
            .flat_map(|sequence| sequence.args.all())
            .filter(|(_, arg)| arg.secret)
            .filter_map(|(_, arg)| arg.name().map(str::to_owned))
            .collect()
    }

    /// Takes the secret args out of `create_request`'s args (placeholders in their
    /// stead); returns each (name, value).
    pub(super) async fn take_secret_args(
        &self,
        grapher: &Grapher,
        create_request: &mut CreateRequest,
    ) -> Result<Vec<(String, String)>, Error> {
        let declared = Self::declared_secret(grapher, &create_request.request_type);
        let named = |value: &serde_json::Value| -> Option<String> {
            let object = value.as_object()?;
            match (object.len(), object.get("secret")) {
                (1, Some(serde_json::Value::String(source))) => Some(source.clone()),
                _ => None,
            }
        };
        let secret_args = self.secret_args();
        let mut taken = Vec::new();
        for (name, value) in create_request.args.iter_mut() {
            let clear = if let Some(source) = named(value) {
                secret_args
                    .resolve(&source, &create_request.request_type)
                    .await
                    .map_err(|why| Error::BadRequest(format!("arg {name}: {why}")))?
            } else if declared.iter().any(|secret| secret == name) {
                match &*value {
                    serde_json::Value::String(text) if *text == job::secret_placeholder(name) => {
                        return Err(Error::BadRequest(format!(
                            "arg {name} is secret, and its value is not kept where it can be read back (a request's args show {text:?}); give it again"
                        )));
                    }
                    serde_json::Value::String(text) => text.clone(),
                    other => other.to_string(),
                }
            } else {
                continue;
            };
            *value = serde_json::Value::String(job::secret_placeholder(name));
            taken.push((name.clone(), clear));
        }
        if !taken.is_empty() && !secret_args.can_seal() {
            return Err(Error::BadRequest(format!(
                "request type {} has secret args ({}), but this Request Manager has no secrets.keys to encrypt them with; expected secrets.keys in its config",
                create_request.request_type,
                taken
                    .iter()
                    .map(|(name, _)| name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(taken)
    }

    /// Each secret arg sealed for request `request_id`.
    pub(super) fn seal_secret_args(
        &self,
        request_id: &str,
        secrets: &[(String, String)],
    ) -> Result<Vec<(String, String)>, Error> {
        let secret_args = self.secret_args();
        secrets
            .iter()
            .map(|(name, value)| {
                let sealed =
                    secret_args
                        .seal(request_id, name, value)
                        .map_err(|err| Error::Internal {
                            message: format!("secret arg {name} cannot be sealed"),
                            source: Some(Box::new(err)),
                        })?;
                Ok((name.clone(), sealed))
            })
            .collect()
    }

    /// The secret args a chain's jobs need, opened: none unless a job arg holds a
    /// placeholder (most chains: no read).
    pub(super) async fn chain_secrets(
        &self,
        request_id: &str,
        job_chain: &JobChain,
    ) -> Result<job::Secrets, Error> {
        let holds_placeholder = job_chain.jobs.values().any(|job| {
            job.args.values().any(|value| {
                value
                    .as_str()
                    .is_some_and(|text| text.starts_with("**** (secret "))
            })
        });
        if !holds_placeholder {
            return Ok(job::Secrets::default());
        }
        let sealed = self.store.request_secrets(request_id).await?;
        let secret_args = self.secret_args();
        let mut opened = Vec::with_capacity(sealed.len());
        for (name, sealed) in sealed {
            let value = secret_args
                .open(request_id, &name, &sealed)
                .map_err(|err| Error::Internal {
                    message: format!("secret arg {name} of request {request_id} cannot be opened"),
                    source: Some(Box::new(err)),
                })?;
            opened.push((job::secret_placeholder(&name), value));
        }
        Ok(job::Secrets::new(opened))
    }
}
