//! Single sign-on's sign-ins in flight, kept in the store: a sign-in begun on one Request
//! Manager is finished on whichever the provider sends the browser back to.

use super::*;

impl Manager {
    /// Keeps a sign-in that begins now (what [`auth::oidc::SignIn::kept`] holds) under its
    /// state, for [`auth::oidc::SIGN_IN_TTL`].
    pub async fn keep_sign_in(&self, sign_in: &auth::oidc::SignIn) -> Result<(), Error> {
        let now = Utc::now();
        let ttl = chrono_duration(auth::oidc::SIGN_IN_TTL);
        self.store
            .keep_sign_in(&sign_in.state, &sign_in.kept, now, now - ttl)
            .await?;
        Ok(())
    }

    /// Takes the sign-in `state` names, once (none: unknown, expired or used already).
    pub async fn take_sign_in(&self, state: &str) -> Result<Option<String>, Error> {
        let not_before = Utc::now() - chrono_duration(auth::oidc::SIGN_IN_TTL);
        Ok(self.store.take_sign_in(state, not_before).await?)
    }
}
