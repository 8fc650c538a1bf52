-- Secret args (issue #33): each secret arg's value, encrypted by the Request Manager
-- (AES-256-GCM under a key of its config, bound to the request and the arg), inserted in
-- the transaction that stores the request. Nowhere else is the value stored: the
-- request's args and its chain hold a placeholder.
CREATE TABLE request_secrets (
    request_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    sealed     TEXT NOT NULL,
    PRIMARY KEY (request_id, name)
);
