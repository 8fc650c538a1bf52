-- A request's own jobs (not the grapher's begin and end wrappers), counted when it is
-- created: what people are shown. 0 for a request stored before (not known).
--
-- Added only when missing, so that the migration can run again (MySQL 8.0 has no ADD
-- COLUMN IF NOT EXISTS; see 0001).
SET @spindle_add_own_jobs := (
    SELECT IF(COUNT(*) = 0,
              'ALTER TABLE requests ADD COLUMN own_jobs BIGINT NOT NULL DEFAULT 0',
              'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'requests' AND COLUMN_NAME = 'own_jobs'
);
PREPARE spindle_add_own_jobs FROM @spindle_add_own_jobs;
EXECUTE spindle_add_own_jobs;
DEALLOCATE PREPARE spindle_add_own_jobs;
