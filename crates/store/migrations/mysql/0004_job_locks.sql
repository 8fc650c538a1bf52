-- Locks held by jobs (issue #34): as sqlite 0012 and postgres 0013. A claim's four key
-- columns are longer than an InnoDB index entry may be (3,072 bytes), so the table keeps
-- no primary key: a claim is made once because its lock's `lock_keys` row is locked
-- (FOR UPDATE) while the taking transaction looks for it and inserts it. Every statement
-- can run again (see 0001 and 0002).
SET @spindle_add_job_id := (
    SELECT IF(COUNT(*) = 0,
              'ALTER TABLE request_locks ADD COLUMN job_id VARCHAR(190) NOT NULL DEFAULT '''' AFTER request_id, ADD INDEX request_locks_by_holder (request_id, job_id)',
              'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'request_locks' AND COLUMN_NAME = 'job_id'
);
PREPARE spindle_add_job_id FROM @spindle_add_job_id;
EXECUTE spindle_add_job_id;
DEALLOCATE PREPARE spindle_add_job_id;

SET @spindle_drop_locks_key := (
    SELECT IF(COUNT(*) = 0, 'DO 0', 'ALTER TABLE request_locks DROP PRIMARY KEY')
    FROM information_schema.TABLE_CONSTRAINTS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'request_locks' AND CONSTRAINT_TYPE = 'PRIMARY KEY'
);
PREPARE spindle_drop_locks_key FROM @spindle_drop_locks_key;
EXECUTE spindle_drop_locks_key;
DEALLOCATE PREPARE spindle_drop_locks_key;
