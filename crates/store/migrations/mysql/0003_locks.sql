-- Locks (issue #34): as sqlite 0011 and postgres 0012. Every statement can run again
-- (see 0001). A lock's key is at most 500 characters (the Request Manager refuses
-- longer ones), so that the primary key fits an index entry.
CREATE TABLE IF NOT EXISTS request_locks (
    request_id VARCHAR(64) NOT NULL,
    name       VARCHAR(190) NOT NULL,
    lock_key   VARCHAR(500) NOT NULL,
    lock_limit INTEGER NOT NULL,
    priority   INTEGER NOT NULL DEFAULT 0,
    queued_at  BIGINT NOT NULL,
    fair_key   VARCHAR(64) NOT NULL DEFAULT '',
    held_since BIGINT,
    PRIMARY KEY (request_id, name, lock_key),
    INDEX request_locks_by_lock (name, lock_key, held_since)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS lock_keys (
    name     VARCHAR(190) NOT NULL,
    lock_key VARCHAR(500) NOT NULL,
    PRIMARY KEY (name, lock_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- When each fairness key last took each lock (round robin between callers).
CREATE TABLE IF NOT EXISTS lock_turns (
    name      VARCHAR(190) NOT NULL,
    lock_key  VARCHAR(500) NOT NULL,
    fair_key  VARCHAR(64) NOT NULL,
    served_at BIGINT NOT NULL,
    PRIMARY KEY (name, lock_key, fair_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

DROP TRIGGER IF EXISTS requests_end_releases_locks;
CREATE TRIGGER requests_end_releases_locks AFTER UPDATE ON requests FOR EACH ROW
    DELETE FROM request_locks
    WHERE request_id = NEW.request_id AND NEW.state IN (3, 4, 6) AND NEW.state <> OLD.state;
