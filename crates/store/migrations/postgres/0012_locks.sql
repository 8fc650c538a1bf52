-- Locks (issue #34). A request of a type that declares locks claims each (its name, the
-- value of its key arg) when it is offered to a Job Runner; a claim is held
-- (`held_since`) or waits in the lock's queue (by priority; then, for a fair lock,
-- round robin over `fair_key`; then `queued_at`, the request's creation). Claims are
-- taken in one transaction that locks the lock's `lock_keys` row, and deleted by the
-- UPDATE that ends the request.
CREATE TABLE request_locks (
    request_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    lock_key   TEXT NOT NULL,
    lock_limit INTEGER NOT NULL,
    priority   INTEGER NOT NULL DEFAULT 0,
    queued_at  BIGINT NOT NULL,
    fair_key   TEXT NOT NULL DEFAULT '',
    held_since BIGINT,
    PRIMARY KEY (request_id, name, lock_key)
);
CREATE INDEX request_locks_by_lock ON request_locks (name, lock_key, held_since);

-- One row per lock ever claimed: what a taking transaction locks (FOR UPDATE), so that
-- two Request Managers never count the same lock's holders at once.
CREATE TABLE lock_keys (
    name     TEXT NOT NULL,
    lock_key TEXT NOT NULL,
    PRIMARY KEY (name, lock_key)
);

-- When each fairness key (a caller, a team) last took each lock: a fair lock's waiters
-- of one priority are served round robin, the key served longest ago first.
CREATE TABLE lock_turns (
    name      TEXT NOT NULL,
    lock_key  TEXT NOT NULL,
    fair_key  TEXT NOT NULL,
    served_at BIGINT NOT NULL,
    PRIMARY KEY (name, lock_key, fair_key)
);

CREATE FUNCTION spindle_release_locks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM request_locks WHERE request_id = NEW.request_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER requests_end_releases_locks AFTER UPDATE OF state ON requests
FOR EACH ROW WHEN (NEW.state IN (3, 4, 6) AND OLD.state IS DISTINCT FROM NEW.state)
EXECUTE FUNCTION spindle_release_locks();
