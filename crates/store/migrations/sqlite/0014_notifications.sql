-- Notifications (issue #33). `notification_events` is the outbox of what happened: a
-- request's end and a runner's loss are inserted by triggers, in the transaction that
-- stores them whatever the path; a wait for an approval by the Request Manager told of
-- it. A Request Manager fans each event out into one `notifications` row per webhook
-- that asked for it and deletes the event, in one transaction; each row is then POSTed
-- until delivered or given up on (`status`: pending, delivered, failed), claimed by one
-- Request Manager at a time (`claimed_until`).
CREATE TABLE notification_events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    event      TEXT NOT NULL,
    request_id TEXT NOT NULL DEFAULT '',
    subject    TEXT NOT NULL DEFAULT '',
    at         INTEGER NOT NULL
);

CREATE TABLE notifications (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id   TEXT NOT NULL UNIQUE,
    webhook       TEXT NOT NULL,
    event         TEXT NOT NULL,
    request_id    TEXT NOT NULL DEFAULT '',
    subject       TEXT NOT NULL DEFAULT '',
    body          TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'pending',
    attempts      INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    next_at       INTEGER NOT NULL,
    done_at       INTEGER,
    last_error    TEXT NOT NULL DEFAULT '',
    claimed_by    TEXT,
    claimed_until INTEGER
);
CREATE INDEX notifications_due ON notifications (status, next_at);
CREATE INDEX notifications_by_request ON notifications (request_id);
CREATE INDEX notifications_by_webhook ON notifications (webhook, created_at);

-- COMPLETE 3, FAIL 4, STOPPED 6.
CREATE TRIGGER requests_end_notifies AFTER UPDATE OF state ON requests
WHEN NEW.state IN (3, 4, 6) AND OLD.state <> NEW.state
BEGIN
    INSERT INTO notification_events (event, request_id, at)
    VALUES (CASE NEW.state WHEN 3 THEN 'completed' WHEN 4 THEN 'failed' ELSE 'stopped' END,
            NEW.request_id, COALESCE(NEW.finished_at, NEW.created_at));
END;

CREATE TRIGGER runner_lost_notifies AFTER UPDATE OF lost_at ON job_runners
WHEN OLD.lost_at IS NULL AND NEW.lost_at IS NOT NULL
BEGIN
    INSERT INTO notification_events (event, subject, at)
    VALUES ('runner_lost', NEW.instance_id, NEW.lost_at);
END;
