-- The four tables a request's history fills (`requests`, `request_archives`,
-- `request_args`, `job_log`) partitioned by ranges of request ids, a month of ids a
-- partition (`<table>_m202612`): an id is an xid, whose first four bytes are its
-- creation second, so that ids sort by the time they were made and a month of requests
-- is one range of them. Retention then removes a month wholly past it by dropping its
-- partitions, not by deleting its rows one by one, which took the database's whole time
-- (issue #51, point 2). `spindle_month_partitions` makes a month's four partitions; the
-- store calls it for the months ahead and the months an import brings
-- (`store/src/sql/partitions.rs`). Every index of a partition is named after its
-- table's, `<index>_<partition suffix>`.
--
-- What is stored already stays where it is, no row copied: each table as it was
-- becomes the partition `<table>_before` of every id before the next month's (and the
-- few rows of ids after it, none of Spindle's own, are moved to the default partition).
-- Attaching it reads it once. A database with nothing stored has no `_before`
-- partitions. The DEFAULT partitions (`<table>_default`) keep the ids no partition's
-- range holds (any that is no xid, and months not made); retention removes those row by
-- row, as on the other backends.
ALTER TABLE request_archives DROP CONSTRAINT request_archives_request_id_fkey;
ALTER TABLE request_args DROP CONSTRAINT request_args_request_id_fkey;
ALTER TABLE suspended_job_chains DROP CONSTRAINT suspended_job_chains_request_id_fkey;

ALTER TABLE requests RENAME TO requests_before;
-- The end's triggers (migrations 0010, 0012, 0015) go to the new table, and from it to
-- every partition, at the end.
DROP TRIGGER requests_end_forgets_tries ON requests_before;
DROP TRIGGER requests_end_releases_locks ON requests_before;
DROP TRIGGER requests_end_notifies ON requests_before;
ALTER INDEX requests_pkey RENAME TO requests_pkey_before;
ALTER INDEX requests_by_created RENAME TO requests_by_created_before;
ALTER INDEX requests_by_type RENAME TO requests_by_type_before;
ALTER INDEX requests_by_user RENAME TO requests_by_user_before;
ALTER INDEX requests_by_state RENAME TO requests_by_state_before;
ALTER INDEX requests_by_finished RENAME TO requests_by_finished_before;
ALTER INDEX requests_by_instance RENAME TO requests_by_instance_before;
CREATE TABLE requests (LIKE requests_before INCLUDING DEFAULTS) PARTITION BY RANGE (request_id);
ALTER TABLE requests ADD CONSTRAINT requests_pkey PRIMARY KEY (request_id);
CREATE INDEX requests_by_created ON requests (created_at DESC, request_id);
CREATE INDEX requests_by_type ON requests (type, created_at DESC, request_id);
CREATE INDEX requests_by_user ON requests (user_name, created_at DESC, request_id);
CREATE INDEX requests_by_state ON requests (state, created_at DESC, request_id);
CREATE INDEX requests_by_finished ON requests (finished_at);
CREATE INDEX requests_by_instance ON requests (jr_instance, state);

ALTER TABLE request_archives RENAME TO request_archives_before;
ALTER INDEX request_archives_pkey RENAME TO request_archives_pkey_before;
CREATE TABLE request_archives (LIKE request_archives_before INCLUDING DEFAULTS) PARTITION BY RANGE (request_id);
ALTER TABLE request_archives ADD CONSTRAINT request_archives_pkey PRIMARY KEY (request_id);

ALTER TABLE request_args RENAME TO request_args_before;
ALTER INDEX request_args_pkey RENAME TO request_args_pkey_before;
ALTER INDEX request_args_by_value_hash RENAME TO request_args_by_value_hash_before;
CREATE TABLE request_args (LIKE request_args_before INCLUDING DEFAULTS) PARTITION BY RANGE (request_id);
ALTER TABLE request_args ADD CONSTRAINT request_args_pkey PRIMARY KEY (request_id, name);
CREATE INDEX request_args_by_value_hash ON request_args (name, md5(value));

ALTER TABLE job_log RENAME TO job_log_before;
ALTER INDEX job_log_pkey RENAME TO job_log_pkey_before;
CREATE TABLE job_log (LIKE job_log_before INCLUDING DEFAULTS) PARTITION BY RANGE (request_id);
ALTER TABLE job_log ADD CONSTRAINT job_log_pkey PRIMARY KEY (request_id, job_id, try);

-- Migration 0104's compression, on the new table (its partitions take it from there).
DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_settings
        WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)
    ) THEN
        EXECUTE 'ALTER TABLE request_archives ALTER COLUMN job_chain SET COMPRESSION lz4';
    END IF;
END
$$;

-- The smallest xid made in second `seconds` (its four bytes of seconds, then zeros, in
-- xid's base32hex): the ids from it on were made from that second on.
CREATE FUNCTION spindle_xid_floor(seconds BIGINT) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    alphabet CONSTANT TEXT := '0123456789abcdefghijklmnopqrstuv';
    id TEXT := '';
BEGIN
    FOR i IN 0..5 LOOP
        id := id || substr(alphabet, ((seconds >> (27 - 5 * i)) & 31)::INT + 1, 1);
    END LOOP;
    RETURN id || substr(alphabet, ((seconds & 3) << 3)::INT + 1, 1) || repeat('0', 13);
END
$$;

-- Names the indexes of partition `<t>_<suffix>` after its table's.
CREATE FUNCTION spindle_name_partition_indexes(t TEXT, suffix TEXT) RETURNS VOID
LANGUAGE plpgsql AS $$
DECLARE
    idx RECORD;
BEGIN
    FOR idx IN
        SELECT child.relname AS child, parent.relname AS parent
        FROM pg_index x
        JOIN pg_class child ON child.oid = x.indexrelid
        JOIN pg_inherits i ON i.inhrelid = child.oid
        JOIN pg_class parent ON parent.oid = i.inhparent
        WHERE x.indrelid = format('%I', t || '_' || suffix)::regclass
          AND child.relname <> parent.relname || '_' || suffix
    LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', idx.child, idx.parent || '_' || suffix);
    END LOOP;
END
$$;

-- The four partitions `<table>_<suffix>` of the ids from `lo` (included) to `hi`:
-- true; false (none made) where that range overlaps a partition's (the `_before` ones).
CREATE FUNCTION spindle_month_partitions(suffix TEXT, lo TEXT, hi TEXT) RETURNS BOOLEAN
LANGUAGE plpgsql AS $$
DECLARE
    t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['requests', 'request_archives', 'request_args', 'job_log'] LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                       t || '_' || suffix, t, lo, hi);
        PERFORM spindle_name_partition_indexes(t, suffix);
    END LOOP;
    RETURN TRUE;
EXCEPTION WHEN invalid_object_definition THEN
    RETURN FALSE;
END
$$;

DO $$
DECLARE
    t TEXT;
    tables CONSTANT TEXT[] := ARRAY['requests', 'request_archives', 'request_args', 'job_log'];
    stored BOOLEAN := EXISTS (SELECT 1 FROM requests_before) OR EXISTS (SELECT 1 FROM job_log_before)
        OR EXISTS (SELECT 1 FROM request_archives_before) OR EXISTS (SELECT 1 FROM request_args_before);
    next_month CONSTANT TEXT := spindle_xid_floor(extract(epoch FROM
        date_trunc('month', now() AT TIME ZONE 'UTC') + INTERVAL '1 month')::BIGINT);
BEGIN
    FOREACH t IN ARRAY tables LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', t || '_default', t);
        PERFORM spindle_name_partition_indexes(t, 'default');
        IF stored THEN
            EXECUTE format('INSERT INTO %I SELECT * FROM %I WHERE request_id >= %L',
                           t, t || '_before', next_month);
            EXECUTE format('DELETE FROM %I WHERE request_id >= %L', t || '_before', next_month);
            EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)',
                           t, t || '_before', next_month);
        ELSE
            EXECUTE format('DROP TABLE %I', t || '_before');
        END IF;
    END LOOP;
END
$$;

ALTER TABLE request_archives ADD CONSTRAINT request_archives_request_id_fkey
    FOREIGN KEY (request_id) REFERENCES requests (request_id);
ALTER TABLE request_args ADD CONSTRAINT request_args_request_id_fkey
    FOREIGN KEY (request_id) REFERENCES requests (request_id);
ALTER TABLE suspended_job_chains ADD CONSTRAINT suspended_job_chains_request_id_fkey
    FOREIGN KEY (request_id) REFERENCES requests (request_id);

CREATE TRIGGER requests_end_forgets_tries AFTER UPDATE OF state ON requests
FOR EACH ROW WHEN (NEW.state IN (3, 4, 6) AND OLD.state IS DISTINCT FROM NEW.state)
EXECUTE FUNCTION spindle_forget_tries();
CREATE TRIGGER requests_end_releases_locks AFTER UPDATE OF state ON requests
FOR EACH ROW WHEN (NEW.state IN (3, 4, 6) AND OLD.state IS DISTINCT FROM NEW.state)
EXECUTE FUNCTION spindle_release_locks();
CREATE TRIGGER requests_end_notifies AFTER UPDATE OF state ON requests
FOR EACH ROW WHEN (NEW.state IN (3, 4, 6) AND OLD.state IS DISTINCT FROM NEW.state)
EXECUTE FUNCTION spindle_notify_end();
