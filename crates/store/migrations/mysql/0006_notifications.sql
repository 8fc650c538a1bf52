-- Notifications (issue #33). `notification_events` is the outbox of what happened: a
-- request's end and a runner's loss are inserted by triggers, in the transaction that
-- stores them whatever the path; a wait for an approval by the Request Manager told of
-- it. A Request Manager fans each event out into one `notifications` row per webhook
-- that asked for it and deletes the event, in one transaction; each row is then POSTed
-- until delivered or given up on (`status`: pending, delivered, failed), claimed by one
-- Request Manager at a time (`claimed_until`).
CREATE TABLE IF NOT EXISTS notification_events (
    seq        BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    event      VARCHAR(32) NOT NULL,
    request_id VARCHAR(64) NOT NULL DEFAULT '',
    subject    VARCHAR(255) NOT NULL DEFAULT '',
    at         BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS notifications (
    id            BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    delivery_id   VARCHAR(64) NOT NULL,
    webhook       VARCHAR(128) NOT NULL,
    event         VARCHAR(32) NOT NULL,
    request_id    VARCHAR(64) NOT NULL DEFAULT '',
    subject       VARCHAR(255) NOT NULL DEFAULT '',
    body          MEDIUMTEXT NOT NULL,
    status        VARCHAR(16) NOT NULL DEFAULT 'pending',
    attempts      INTEGER NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    next_at       BIGINT NOT NULL,
    done_at       BIGINT,
    last_error    TEXT NOT NULL DEFAULT (''),
    claimed_by    VARCHAR(255),
    claimed_until BIGINT,
    UNIQUE KEY notifications_by_delivery (delivery_id),
    KEY notifications_due (status, next_at),
    KEY notifications_by_request (request_id),
    KEY notifications_by_webhook (webhook, created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- COMPLETE 3, FAIL 4, STOPPED 6.
DROP TRIGGER IF EXISTS requests_end_notifies;
CREATE TRIGGER requests_end_notifies AFTER UPDATE ON requests FOR EACH ROW
    INSERT INTO notification_events (event, request_id, at)
    SELECT CASE NEW.state WHEN 3 THEN 'completed' WHEN 4 THEN 'failed' ELSE 'stopped' END,
           NEW.request_id, COALESCE(NEW.finished_at, NEW.created_at)
    FROM DUAL WHERE NEW.state IN (3, 4, 6) AND NEW.state <> OLD.state;

DROP TRIGGER IF EXISTS runner_lost_notifies;
CREATE TRIGGER runner_lost_notifies AFTER UPDATE ON job_runners FOR EACH ROW
    INSERT INTO notification_events (event, subject, at)
    SELECT 'runner_lost', NEW.instance_id, NEW.lost_at
    FROM DUAL WHERE OLD.lost_at IS NULL AND NEW.lost_at IS NOT NULL;
