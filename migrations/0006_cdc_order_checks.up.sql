-- The cdc's durable state of the order_table evidence check, per checkpoint
-- (name): a legacy shop whose order table names the template and the user
-- of a coupon's use, not the coupon. Written in the transaction of the
-- batch that changes it, with the checkpoint: a replay after a crash
-- neither loses nor repeats an anomaly.
--
-- One row per (template, user) whose USED coupons and orders differ, as the
-- binlog shows them (a key that balances again is deleted, so the table
-- holds the open differences, not every user). difference is USED coupons
-- minus orders: above 0, uses without an order (used_without_redemption),
-- below 0, orders without a use (double_spend). A difference is decided
-- when its deadline passes (the grace after the batch that changed it: a
-- shop may write the order and the coupon in separate transactions), one
-- anomaly per unit not reported yet; reported_missing and reported_extra
-- remember what was reported, and shrink with the difference (an order that
-- arrives late clears the difference; a later one is new). last_coupon is
-- the key's last coupon that became USED, last_order its last order, for
-- the anomaly. A bootstrap rewrites a checkpoint's keys from its snapshot.
CREATE TABLE cdc_order_key (
  name             VARCHAR(64)     NOT NULL,
  template_id      BIGINT          NOT NULL,
  user_id          VARBINARY(255)  NOT NULL,
  difference       BIGINT          NOT NULL,
  reported_missing BIGINT UNSIGNED NOT NULL DEFAULT 0,
  reported_extra   BIGINT UNSIGNED NOT NULL DEFAULT 0,
  deadline         DATETIME(6)     NULL,
  last_coupon      BIGINT UNSIGNED NULL,
  last_order       VARBINARY(255)  NULL,
  PRIMARY KEY (name, template_id, user_id),
  KEY due (name, deadline)
) ENGINE=InnoDB;
