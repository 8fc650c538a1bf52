-- Triggers (issue #33): each delivery a trigger accepted, keyed by the id its sender gave
-- it, with the request it created. Inserted in the transaction that stores the request, so
-- a delivery sent again creates nothing and is answered with the same request.
CREATE TABLE trigger_deliveries (
    trigger_name TEXT NOT NULL,
    delivery_id  TEXT NOT NULL,
    request_id   TEXT NOT NULL,
    received_at  BIGINT NOT NULL,
    PRIMARY KEY (trigger_name, delivery_id)
);
CREATE INDEX trigger_deliveries_by_time ON trigger_deliveries (trigger_name, received_at);
CREATE INDEX trigger_deliveries_by_request ON trigger_deliveries (request_id);
