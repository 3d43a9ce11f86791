-- Issue 27: findings with a life. A finding is what the cdc (an anomaly)
-- or the reconciler (a difference left for a person) found, named by a
-- stable fingerprint: its kind and the rows it names. Its lifecycle is
-- open -> acknowledged (who, why, when) -> closed. Found again as it was,
-- an acknowledged finding stays acknowledged (times_seen, last_seen move);
-- found with another content (more rows, another value), or found again
-- once closed, it is open again. cdc_anomaly and reconcile_task keep every
-- occurrence as before: this is the lifecycle on top of them.
CREATE TABLE finding (
  fingerprint         CHAR(16)        NOT NULL, -- hex of the kind and the rows named (inventory.Fingerprint)
  source              VARCHAR(16)     NOT NULL, -- cdc or reconcile
  kind                VARCHAR(64)     NOT NULL, -- the anomaly's kind; a difference's store/field
  subject             VARCHAR(255)    NOT NULL, -- the rows it names, as people read them
  content             CHAR(16)        NOT NULL, -- hex of what was found of them: another content reopens
  summary             VARCHAR(512)    NOT NULL, -- the latest occurrence's detail
  state               VARCHAR(16)     NOT NULL DEFAULT 'open', -- open, acknowledged, closed
  first_seen          DATETIME(6)     NOT NULL,
  last_seen           DATETIME(6)     NOT NULL,
  times_seen          BIGINT UNSIGNED NOT NULL DEFAULT 1,
  acknowledged_by     VARCHAR(64)     NULL, -- the latest acknowledgement (kept when the finding opens again)
  acknowledged_at     DATETIME(6)     NULL,
  acknowledged_reason VARCHAR(512)    NULL,
  closed_by           VARCHAR(64)     NULL,
  closed_at           DATETIME(6)     NULL,
  closed_reason       VARCHAR(512)    NULL,
  PRIMARY KEY (fingerprint),
  KEY idx_finding_state (source, state, kind),
  KEY idx_finding_seen (last_seen)
) ENGINE=InnoDB;
