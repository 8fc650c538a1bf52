//! The specs requests are built from: loading and reloading them, and their versions.

use super::*;

impl Manager {
    /// The version of the specs requests are built from now (empty when not kept).
    pub fn spec_version(&self) -> String {
        self.read_loaded().version.clone()
    }

    /// Stores the version of the specs the manager was made with (`specs`, their files),
    /// which requests record from now on.
    pub async fn record_specs(&self, specs: &SpecVersion) -> Result<(), Error> {
        self.store.add_spec_version(specs, Utc::now()).await?;
        self.specs
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .version
            .clone_from(&specs.version);
        Ok(())
    }

    /// Builds requests from now on from `grapher`'s specs, whose files are `specs`
    /// (stored first, so that every request names a version the store has), with
    /// `acls` (their ACLs) replacing the old ones when authentication is on. Requests
    /// created before keep the version they were built from.
    pub async fn load_specs(
        &self,
        grapher: Grapher,
        specs: &SpecVersion,
        acls: Option<auth::Acls>,
    ) -> Result<(), Error> {
        self.store.add_spec_version(specs, Utc::now()).await?;
        let mut loaded = self
            .specs
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let auth = match (&loaded.auth, acls) {
            (Some(auth), Some(acls)) => Some(Arc::new(auth::Auth {
                acls,
                ..auth::Auth::clone(auth)
            })),
            (auth, _) => auth.clone(),
        };
        let schedules = Arc::clone(&loaded.schedules);
        *loaded = Loaded {
            locks: declares_locks(&grapher),
            grapher: Arc::new(grapher),
            version: specs.version.clone(),
            auth,
            schedules,
        };
        Ok(())
    }

    /// Starts requests on these schedules from now on (the specs' `schedules:`, which
    /// the linter accepted).
    pub fn set_schedules(&self, schedules: Vec<spec::schedule::Fires>) {
        self.specs
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .schedules = Arc::new(schedules);
    }

    /// The spec files request `request_id` was built from.
    pub async fn request_spec(&self, request_id: &str) -> Result<SpecVersion, Error> {
        let request = self.store.get_request(request_id, false).await?;
        if request.spec_version.is_empty() {
            return Err(Error::NotFound(format!(
                "request {request_id} has no spec version: it was created before Spindle kept them, or by a Request Manager that does not"
            )));
        }
        Ok(self.store.spec_version(&request.spec_version).await?)
    }

    pub fn request_specs(&self) -> Vec<RequestSpec> {
        self.read_loaded().grapher.request_specs()
    }
}
