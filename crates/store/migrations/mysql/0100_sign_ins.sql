-- Single sign-on's sign-ins in flight (issue #48): each begun on one Request Manager and
-- finished on any, so kept here rather than in one process's memory. Taken once (the
-- row removed as it is read); rows older than a sign-in's time to live are removed as
-- new ones begin.
CREATE TABLE IF NOT EXISTS sign_ins (
    state      VARCHAR(128) NOT NULL,
    payload    TEXT NOT NULL,
    began_at   BIGINT NOT NULL,
    PRIMARY KEY (state),
    KEY sign_ins_by_time (began_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
