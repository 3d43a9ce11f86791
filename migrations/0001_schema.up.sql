-- couponlink reference schema. Forward-only: never edit an applied file,
-- add a new numbered one.

CREATE TABLE coupon_template (
  id                       BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  name                     VARCHAR(200)    NOT NULL,
  total_quota              BIGINT          NOT NULL,
  valid_seconds            BIGINT          NOT NULL,
  per_user_limit           INT             NOT NULL DEFAULT 1,
  expiry_policy            VARCHAR(16)     NOT NULL DEFAULT 'freeze',
  release_cooldown_seconds BIGINT          NOT NULL DEFAULT 259200,
  -- cached counts, refreshed by the cdc in the transaction of its checkpoint
  issued_count             BIGINT          NOT NULL DEFAULT 0,
  used_count               BIGINT          NOT NULL DEFAULT 0,
  expired_count            BIGINT          NOT NULL DEFAULT 0,
  version                  BIGINT          NOT NULL DEFAULT 1,
  created_at               DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at               DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  CONSTRAINT chk_template_quota CHECK (total_quota > 0),
  CONSTRAINT chk_template_policy CHECK (expiry_policy IN ('freeze', 'release'))
) ENGINE=InnoDB;

-- One bucket of a template's quota. claimed < quota is the synchronous claim guard.
CREATE TABLE channel_quota (
  template_id BIGINT UNSIGNED NOT NULL,
  channel     VARCHAR(64)     NOT NULL,
  quota       BIGINT          NOT NULL,
  claimed     BIGINT          NOT NULL DEFAULT 0,
  version     BIGINT          NOT NULL DEFAULT 1,
  updated_at  DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (template_id, channel),
  CONSTRAINT chk_quota_claimed CHECK (claimed >= 0 AND claimed <= quota)
) ENGINE=InnoDB;

-- One real coupon. status: 1 AVAILABLE, 2 USED, 3 EXPIRED, 4 RETURNED.
CREATE TABLE user_coupon (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  template_id BIGINT UNSIGNED NOT NULL,
  user_id     VARCHAR(64)     NOT NULL,
  channel     VARCHAR(64)     NOT NULL,
  status      TINYINT         NOT NULL,
  claimed_at  DATETIME(6)     NOT NULL,
  redeemed_at DATETIME(6)     NULL,
  expires_at  DATETIME(6)     NOT NULL,
  order_id    VARCHAR(64)     NULL,
  request_id  VARCHAR(128)    NULL,
  version     BIGINT          NOT NULL DEFAULT 1,
  updated_at  DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_user_coupon_request (request_id),
  KEY idx_user_coupon_tpl_channel_status (template_id, channel, status),
  KEY idx_user_coupon_user_tpl (user_id, template_id),
  KEY idx_user_coupon_status_expires (status, expires_at)
) ENGINE=InnoDB;

-- How many coupons of a template a user has claimed: the per-user limit
-- guard, one row lock per (template, user) instead of a range lock.
CREATE TABLE user_claim (
  template_id BIGINT UNSIGNED NOT NULL,
  user_id     VARCHAR(64)     NOT NULL,
  claimed     INT             NOT NULL,
  PRIMARY KEY (template_id, user_id)
) ENGINE=InnoDB;

-- One redemption. idempotency_key = order_id + '/' + user_coupon_id.
CREATE TABLE redemption_log (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  user_coupon_id  BIGINT UNSIGNED NOT NULL,
  template_id     BIGINT UNSIGNED NOT NULL,
  channel         VARCHAR(64)     NOT NULL,
  order_id        VARCHAR(64)     NOT NULL,
  redeemed_at     DATETIME(6)     NOT NULL,
  idempotency_key VARCHAR(200)    NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_redemption_idempotency (idempotency_key),
  KEY idx_redemption_coupon (user_coupon_id)
) ENGINE=InnoDB;

-- One reverse or corrective movement of a coupon's slot.
-- kind: refund, expire, void, release, correction.
-- seq: the redemption refunded (refund), the version expired from (expire), else 0;
-- UNIQUE(user_coupon_id, kind, seq)
-- makes every movement happen once.
CREATE TABLE inventory_flow (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  user_coupon_id BIGINT UNSIGNED NOT NULL,
  kind           VARCHAR(16)     NOT NULL,
  seq            BIGINT UNSIGNED NOT NULL DEFAULT 0,
  template_id    BIGINT UNSIGNED NOT NULL,
  channel        VARCHAR(64)     NOT NULL,
  from_status    TINYINT         NOT NULL,
  to_status      TINYINT         NOT NULL,
  mode           VARCHAR(16)     NULL,
  order_id       VARCHAR(64)     NULL,
  reason         VARCHAR(255)    NULL,
  operator       VARCHAR(64)     NULL,
  request_id     VARCHAR(128)    NULL,
  created_at     DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_inventory_flow (user_coupon_id, kind, seq),
  KEY idx_inventory_flow_tpl (template_id, channel, kind)
) ENGINE=InnoDB;

-- One void batch request, so that a replayed request_id is recognised and a
-- reused one with another payload is refused.
CREATE TABLE void_request (
  request_id   VARCHAR(128) NOT NULL,
  payload_hash CHAR(64)     NOT NULL,
  reason       VARCHAR(255) NOT NULL,
  operator     VARCHAR(64)  NOT NULL,
  created_at   DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (request_id)
) ENGINE=InnoDB;

-- Derived state counts per (template, channel), written by the cdc only.
CREATE TABLE inventory_counter (
  template_id BIGINT UNSIGNED NOT NULL,
  channel     VARCHAR(64)     NOT NULL,
  held        BIGINT          NOT NULL DEFAULT 0,
  used        BIGINT          NOT NULL DEFAULT 0,
  expired     BIGINT          NOT NULL DEFAULT 0,
  returned    BIGINT          NOT NULL DEFAULT 0,
  released    BIGINT          NOT NULL DEFAULT 0,
  -- binlog stamp (file number << 32 | offset) of the batch that last changed
  -- this row: the reconciler compares a row with the truth at a snapshot
  -- position P exactly when stamp <= P
  stamp       BIGINT          NOT NULL DEFAULT 0,
  updated_at  DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (template_id, channel)
) ENGINE=InnoDB;

-- The binlog position the counters reflect; written in the counters' transaction.
-- epoch fences a deposed leader: each leader takes a new epoch at start and
-- every batch updates the row only WHERE epoch = its own.
CREATE TABLE cdc_checkpoint (
  name           VARCHAR(64)     NOT NULL,
  binlog_file    VARCHAR(255)    NOT NULL,
  binlog_pos     BIGINT UNSIGNED NOT NULL,
  gtid_set       TEXT            NOT NULL,
  event_time     DATETIME(6)     NULL,
  epoch          BIGINT UNSIGNED NOT NULL DEFAULT 0,
  leader         VARCHAR(255)    NOT NULL DEFAULT '',
  events_applied BIGINT UNSIGNED NOT NULL DEFAULT 0,
  batches        BIGINT UNSIGNED NOT NULL DEFAULT 0,
  anomalies      BIGINT UNSIGNED NOT NULL DEFAULT 0,
  bootstrapped_at DATETIME(6)    NULL,
  updated_at     DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (name)
) ENGINE=InnoDB;

-- One anomaly the cdc saw in the binlog: illegal_transition, used_without_redemption,
-- duplicate_redemption, over_issue, deleted_coupon. Written in the checkpoint's transaction.
CREATE TABLE cdc_anomaly (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  kind           VARCHAR(32)     NOT NULL,
  user_coupon_id BIGINT UNSIGNED NULL,
  template_id    BIGINT UNSIGNED NULL,
  channel        VARCHAR(64)     NULL,
  from_status    TINYINT         NULL,
  to_status      TINYINT         NULL,
  order_id       VARCHAR(64)     NULL,
  detail         VARCHAR(512)    NOT NULL,
  binlog_file    VARCHAR(255)    NOT NULL,
  binlog_pos     BIGINT UNSIGNED NOT NULL,
  gtid_set       TEXT            NULL,
  event_time     DATETIME(6)     NULL,
  created_at     DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  KEY idx_cdc_anomaly_kind (kind, created_at),
  KEY idx_cdc_anomaly_coupon (user_coupon_id)
) ENGINE=InnoDB;

-- One reconciliation pass.
CREATE TABLE reconcile_task (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  started_at     DATETIME(6)  NOT NULL,
  finished_at    DATETIME(6)  NULL,
  binlog_file    VARCHAR(255) NULL,
  binlog_pos     BIGINT UNSIGNED NULL,
  gtid_set       TEXT         NULL,
  mysql_snapshot JSON         NULL,
  redis_snapshot JSON         NULL,
  differences    JSON         NULL,
  status         VARCHAR(16)  NOT NULL DEFAULT 'running',
  summary        VARCHAR(512) NULL,
  resolved_at    DATETIME(6)  NULL,
  resolved_by    VARCHAR(64)  NULL,
  resolved_note  TEXT         NULL,
  PRIMARY KEY (id),
  KEY idx_reconcile_status (status, started_at)
) ENGINE=InnoDB;

-- One correction made by the reconciler or a person.
CREATE TABLE correction_log (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  task_id     BIGINT UNSIGNED NULL,
  store       VARCHAR(16)  NOT NULL,
  target      VARCHAR(255) NOT NULL,
  old_value   BIGINT       NULL,
  new_value   BIGINT       NULL,
  reason      VARCHAR(255) NOT NULL,
  mode        VARCHAR(16)  NOT NULL,
  actor       VARCHAR(64)  NOT NULL,
  created_at  DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_correction_task_target (task_id, store, target)
) ENGINE=InnoDB;

-- One quota move between two channel buckets of a template.
CREATE TABLE quota_transfer_log (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  template_id  BIGINT UNSIGNED NOT NULL,
  from_channel VARCHAR(64)  NOT NULL,
  to_channel   VARCHAR(64)  NOT NULL,
  amount       BIGINT       NOT NULL,
  rule         VARCHAR(255) NOT NULL,
  rates_seen   JSON         NULL,
  mode         VARCHAR(16)  NOT NULL,
  created_at   DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  KEY idx_quota_transfer_tpl (template_id, created_at)
) ENGINE=InnoDB;
