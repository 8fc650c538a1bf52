-- Notifications (issue #33). `notification_events` is the outbox of what happened: a
-- request's end and a runner's loss are inserted by triggers, in the transaction that
-- stores them whatever the path; a wait for an approval by the Request Manager told of
-- it. A Request Manager fans each event out into one `notifications` row per webhook
-- that asked for it and deletes the event, in one transaction; each row is then POSTed
-- until delivered or given up on (`status`: pending, delivered, failed), claimed by one
-- Request Manager at a time (`claimed_until`).
CREATE TABLE notification_events (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event      TEXT NOT NULL,
    request_id TEXT NOT NULL DEFAULT '',
    subject    TEXT NOT NULL DEFAULT '',
    at         BIGINT NOT NULL
);

CREATE TABLE notifications (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id   TEXT NOT NULL UNIQUE,
    webhook       TEXT NOT NULL,
    event         TEXT NOT NULL,
    request_id    TEXT NOT NULL DEFAULT '',
    subject       TEXT NOT NULL DEFAULT '',
    body          TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'pending',
    attempts      INTEGER NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    next_at       BIGINT NOT NULL,
    done_at       BIGINT,
    last_error    TEXT NOT NULL DEFAULT '',
    claimed_by    TEXT,
    claimed_until BIGINT
);
CREATE INDEX notifications_due ON notifications (status, next_at);
CREATE INDEX notifications_by_request ON notifications (request_id);
CREATE INDEX notifications_by_webhook ON notifications (webhook, created_at);

-- COMPLETE 3, FAIL 4, STOPPED 6.
CREATE FUNCTION spindle_notify_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO notification_events (event, request_id, at)
    VALUES (CASE NEW.state WHEN 3 THEN 'completed' WHEN 4 THEN 'failed' ELSE 'stopped' END,
            NEW.request_id, COALESCE(NEW.finished_at, NEW.created_at));
    RETURN NULL;
END
$$;

CREATE TRIGGER requests_end_notifies AFTER UPDATE OF state ON requests
FOR EACH ROW WHEN (NEW.state IN (3, 4, 6) AND OLD.state IS DISTINCT FROM NEW.state)
EXECUTE FUNCTION spindle_notify_end();

CREATE FUNCTION spindle_notify_runner_lost() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO notification_events (event, subject, at)
    VALUES ('runner_lost', NEW.instance_id, NEW.lost_at);
    RETURN NULL;
END
$$;

CREATE TRIGGER runner_lost_notifies AFTER UPDATE OF lost_at ON job_runners
FOR EACH ROW WHEN (OLD.lost_at IS NULL AND NEW.lost_at IS NOT NULL)
EXECUTE FUNCTION spindle_notify_runner_lost();
