-- Issue 6: rebalancing policies (defaults published by the cdc, overrides
-- per template set by operators, every change audited) and the webhook
-- outbox (events written in the transaction of the change they report).

-- One row per template that overrides the defaults; NULL = inherit.
-- template_id 0 holds the defaults the cdc runs with (written by the cdc
-- from its configuration at start), so every reader sees the same policy.
CREATE TABLE quota_policy (
  template_id      BIGINT UNSIGNED NOT NULL,
  mode             VARCHAR(8)      NULL,
  low              DOUBLE          NULL,
  high             DOUBLE          NULL,
  min_claims       BIGINT          NULL,
  max_share        DOUBLE          NULL,
  reserve          DOUBLE          NULL,
  cooldown_seconds BIGINT          NULL,
  min_age_seconds  BIGINT          NULL,
  version          BIGINT          NOT NULL DEFAULT 1,
  updated_by       VARCHAR(128)    NOT NULL,
  updated_at       DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (template_id),
  CONSTRAINT chk_quota_policy_mode CHECK (mode IS NULL OR mode IN ('off', 'signal', 'auto'))
) ENGINE=InnoDB;

-- One row per change of a policy row: who, why, from where, before and after.
CREATE TABLE quota_policy_audit (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  template_id BIGINT UNSIGNED NOT NULL,
  version     BIGINT          NOT NULL,
  action      VARCHAR(8)      NOT NULL, -- set, reset
  before_json TEXT            NULL,
  after_json  TEXT            NULL,
  changed_by  VARCHAR(128)    NOT NULL,
  reason      VARCHAR(255)    NOT NULL,
  source      VARCHAR(16)     NOT NULL, -- cli, api, config
  created_at  DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  KEY idx_quota_policy_audit_tpl (template_id, id)
) ENGINE=InnoDB;

-- A transfer row is a move applied (mode auto) or only recommended (mode
-- signal, channel_quota untouched). decision groups the rows of one decision.
ALTER TABLE quota_transfer_log
  ADD COLUMN decision CHAR(32) NOT NULL DEFAULT '' AFTER template_id,
  ADD KEY idx_quota_transfer_mode (template_id, mode, created_at);

-- Webhook events awaiting delivery. body is the exact bytes signed and sent.
CREATE TABLE webhook_outbox (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  event_id        CHAR(32)        NOT NULL,
  event           VARCHAR(32)     NOT NULL,
  template_id     BIGINT UNSIGNED NULL,
  channel         VARCHAR(64)     NULL,
  body            MEDIUMBLOB      NOT NULL,
  status          VARCHAR(12)     NOT NULL DEFAULT 'pending', -- pending, delivered, dropped
  attempts        INT             NOT NULL DEFAULT 0,
  next_attempt_at DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  last_error      VARCHAR(512)    NULL,
  created_at      DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  finished_at     DATETIME(6)     NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_webhook_event (event_id),
  KEY idx_webhook_due (status, next_attempt_at),
  KEY idx_webhook_finished (status, finished_at)
) ENGINE=InnoDB;
