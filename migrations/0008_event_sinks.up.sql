-- Issue 18: event streams beside webhooks. Each stream sink (a Redis
-- stream, a NATS JetStream subject) reads the webhook outbox in id order
-- from its own position: the last outbox id it took (or skipped). One cdc
-- at a time delivers to a sink: the one holding the row's lease.
CREATE TABLE event_sink_position (
  sink            VARCHAR(64)     NOT NULL,
  last_id         BIGINT UNSIGNED NOT NULL DEFAULT 0, -- every outbox row up to this id was taken or skipped
  attempts        INT             NOT NULL DEFAULT 0, -- failed rounds since the position last moved
  next_attempt_at DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  last_error      VARCHAR(512)    NULL,
  delivered       BIGINT UNSIGNED NOT NULL DEFAULT 0, -- events taken by the sink, in all
  dropped         BIGINT UNSIGNED NOT NULL DEFAULT 0, -- events given up (refused too often, or beyond the pending bound)
  lease_owner     CHAR(32)        NOT NULL DEFAULT '',
  lease_until     DATETIME(6)     NOT NULL DEFAULT '1970-01-01 00:00:01',
  updated_at      DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (sink)
) ENGINE=InnoDB;

