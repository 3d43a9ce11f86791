-- The cdc's durable state of its two redemption checks, per checkpoint
-- (name). Both are written in the transaction of the batch that changes
-- them, with the checkpoint: a replay after a crash neither loses nor
-- repeats an anomaly.

-- Per (coupon, order): how many redemption rows of it the binlog has shown
-- (rows inserted minus rows deleted; a key at 0 is deleted). A row inserted
-- while its key is at 1 or more is a duplicate_redemption. Written only for
-- a legacy redemption table without a unique key on (order, coupon): one
-- row per redemption, the size of that table. A bootstrap rewrites a
-- checkpoint's keys from its snapshot.
CREATE TABLE cdc_redemption_key (
  name           VARCHAR(64)     NOT NULL,
  user_coupon_id BIGINT UNSIGNED NOT NULL,
  order_id       VARBINARY(255)  NOT NULL,
  row_count      INT UNSIGNED    NOT NULL,
  PRIMARY KEY (name, user_coupon_id, order_id)
) ENGINE=InnoDB;

-- Coupons that became USED (by order_id; '' when the mapping has no order
-- column) with no redemption row of that order seen yet: decided when the
-- deadline passes (no row by then: used_without_redemption, one per move
-- into USED), dropped when the row arrives. Usually empty: a row exists
-- only while a check outlives the batch that started it.
CREATE TABLE cdc_pending_redemption (
  name           VARCHAR(64)     NOT NULL,
  user_coupon_id BIGINT UNSIGNED NOT NULL,
  order_id       VARBINARY(255)  NOT NULL,
  template_id    BIGINT UNSIGNED NOT NULL,
  channel        VARCHAR(64)     NOT NULL,
  from_status    TINYINT         NOT NULL,
  moves          INT UNSIGNED    NOT NULL,
  deadline       DATETIME(6)     NOT NULL,
  PRIMARY KEY (name, user_coupon_id, order_id)
) ENGINE=InnoDB;
