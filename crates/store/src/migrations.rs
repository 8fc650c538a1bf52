//! What every backend's migrations share (`migrations/README.md`): an older binary runs
//! on a schema that a newer one migrated, since the migrations of one version are
//! additive, and says so in its log.

use sqlx::migrate::Migrator;

/// `migrator` as Spindle runs it: without sqlx's lock (each backend takes its own, that
/// works through PgBouncer too), and taking a schema with applied migrations it does not
/// know, of a newer release (docs/deploying.md, "Upgrading").
pub(crate) fn spindle(mut migrator: Migrator) -> Migrator {
    migrator.set_locking(false);
    migrator.set_ignore_missing(true);
    migrator
}

/// The applied migrations among `applied` that `migrator` does not know: a newer
/// release's, logged once at open.
pub(crate) fn note_unknown(applied: &[i64], migrator: &Migrator) -> Vec<i64> {
    let unknown: Vec<i64> = applied
        .iter()
        .copied()
        .filter(|version| !migrator.iter().any(|known| known.version == *version))
        .collect();
    if !unknown.is_empty() {
        let known = migrator
            .iter()
            .map(|known| known.version)
            .max()
            .unwrap_or(0);
        tracing::warn!(
            unknown = ?unknown,
            known,
            "the schema holds migrations this binary does not know (a newer release applied them); it runs on it, as migrations within a version are additive: upgrade this binary"
        );
    }
    unknown
}

/// The statement that lists the applied migrations (on every backend).
pub(crate) const APPLIED: &str = "SELECT version FROM _sqlx_migrations WHERE success = TRUE";
