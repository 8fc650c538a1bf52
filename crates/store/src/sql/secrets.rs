//! The `request_secrets` table: secret args' values, sealed by the Request Manager
//! (issue #33); inserted by `write_batch` with their request.

use super::*;

impl<DB: Backend> SqlStore<DB> {
    pub(crate) async fn request_secrets(
        &self,
        request_id: &str,
    ) -> Result<Vec<(String, String)>, Error> {
        let rows = self
            .rows_of_request(
                "SELECT name, sealed FROM request_secrets WHERE request_id = $1 ORDER BY name",
                request_id,
            )
            .await?;
        rows.iter()
            .map(|row| Ok((row.read("name")?, row.read("sealed")?)))
            .collect()
    }
}
