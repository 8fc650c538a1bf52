//! The `spec_versions` and `audit` tables: the spec files requests were built from, and
//! who did what to a request.

use super::*;

impl<DB: Backend> SqlStore<DB> {
    pub(crate) async fn add_spec_version(
        &self,
        specs: &SpecVersion,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        let files = to_json("spec files", &specs.files)?;
        Statement::new(
            "INSERT INTO spec_versions (version, files, created_at) VALUES ($1, $2, $3)",
        )
        .bind(specs.version.as_str())
        .bind(files)
        .bind(micros(at))
        .skip_duplicates("version")
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(crate) async fn spec_version(&self, version: &str) -> Result<SpecVersion, Error> {
        let row = Statement::new("SELECT files FROM spec_versions WHERE version = $1")
            .bind(version)
            .fetch_optional(&self.readers)
            .await?
            .ok_or_else(|| Error::not_found("spec version", version))?;
        let files: String = row.read("files")?;
        Ok(SpecVersion {
            version: version.to_owned(),
            files: from_json("stored spec files", &files)?,
        })
    }

    pub(crate) async fn add_audit(
        &self,
        request_id: &str,
        event: &AuditEvent,
    ) -> Result<(), Error> {
        Statement::new(
            "INSERT INTO request_audit (request_id, at, action, user_name, address) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(request_id)
        .bind(micros(event.at))
        .bind(event.action.as_str())
        .bind(event.user.as_str())
        .bind(event.address.as_str())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(crate) async fn audit(&self, request_id: &str) -> Result<Vec<AuditEvent>, Error> {
        let sql = "SELECT at, action, user_name, address FROM request_audit WHERE request_id = $1 ORDER BY at";
        let rows = self.rows_of_request(sql, request_id).await?;
        rows.iter()
            .map(|row| {
                Ok(AuditEvent {
                    at: from_micros(row.read("at")?),
                    action: row.read("action")?,
                    user: row.read("user_name")?,
                    address: row.read("address")?,
                })
            })
            .collect()
    }
}
