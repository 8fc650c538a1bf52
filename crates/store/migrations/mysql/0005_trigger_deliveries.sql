-- Triggers (issue #33): each delivery a trigger accepted, keyed by the id its sender gave
-- it, with the request it created. Inserted in the transaction that stores the request, so
-- a delivery sent again creates nothing and is answered with the same request.
CREATE TABLE IF NOT EXISTS trigger_deliveries (
    trigger_name VARCHAR(128) NOT NULL,
    delivery_id  VARCHAR(255) NOT NULL,
    request_id   VARCHAR(64) NOT NULL,
    received_at  BIGINT NOT NULL,
    PRIMARY KEY (trigger_name, delivery_id),
    KEY trigger_deliveries_by_time (trigger_name, received_at),
    KEY trigger_deliveries_by_request (request_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
