-- Single sign-on's sign-ins in flight (issue #48): each begun on one Request Manager and
-- finished on any, so kept here rather than in one process's memory. Taken once (the
-- row removed as it is read); rows older than a sign-in's time to live are removed as
-- new ones begin.
CREATE TABLE sign_ins (
    state      TEXT PRIMARY KEY,
    payload    TEXT NOT NULL,
    began_at   BIGINT NOT NULL
);
CREATE INDEX sign_ins_by_time ON sign_ins (began_at);
