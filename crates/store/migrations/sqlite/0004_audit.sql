-- Who did what to each request, when and from where (Spindle's audit trail): created,
-- started, stopped. Only ever inserted; deleted with its request.
CREATE TABLE request_audit (
    request_id TEXT NOT NULL,
    at         INTEGER NOT NULL,
    action     TEXT NOT NULL,
    user_name  TEXT NOT NULL,
    address    TEXT NOT NULL
);
CREATE INDEX request_audit_by_request ON request_audit (request_id, at);
