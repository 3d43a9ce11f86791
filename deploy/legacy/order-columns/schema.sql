-- A shop that writes the order onto the coupon row: using a coupon sets
-- status 1 and order_sn in one UPDATE. No write-off table, no remaining
-- stock column (the claim guard counts the batch's coupons), no voids or
-- refunds of the coupon itself (no RETURNED code). Channels are short
-- strings. Rows are soft-deleted (deleted = 1). A refund or a cancelled
-- order gives the coupon back (status 0) and keeps the old order_sn on the
-- row; the checkout may write order_sn before the payment marks the coupon
-- used: only an order open in shop_order (not 3 cancelled, 4 refunded)
-- proves a use that keeps the order_sn. A batch's total_count of 0 means
-- unlimited; its status takes it off the shelf (0 draft, 2 off), and
-- batches are soft-deleted too. Each coupon has its own expire_time
-- besides the batch's end_time.
CREATE TABLE coupon_batch (
  batch_id    INT          NOT NULL PRIMARY KEY,
  batch_name  VARCHAR(100) NOT NULL,
  total_count INT          NOT NULL COMMENT '0: unlimited',
  per_limit   INT          NOT NULL DEFAULT 0 COMMENT '0: no limit',
  end_time    DATETIME     NOT NULL,
  status      TINYINT      NOT NULL DEFAULT 1 COMMENT '0 draft, 1 on sale, 2 off the shelf',
  deleted     TINYINT      NOT NULL DEFAULT 0
) ENGINE=InnoDB;

CREATE TABLE member_coupon (
  id       BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  batch_id INT         NOT NULL,
  uid      VARCHAR(32) NOT NULL,
  get_from VARCHAR(16) NOT NULL COMMENT 'h5, app',
  status   TINYINT     NOT NULL DEFAULT 0 COMMENT '0 unused, 1 used, 2 expired',
  order_sn VARCHAR(32) NULL,
  use_time DATETIME    NULL,
  expire_time DATETIME NULL COMMENT 'its own end, besides end_time',
  deleted  TINYINT     NOT NULL DEFAULT 0,
  KEY idx_batch_uid (batch_id, uid),
  KEY idx_batch_from_status (batch_id, get_from, status)
) ENGINE=InnoDB;

CREATE TABLE shop_order (
  id       BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  order_sn VARCHAR(32) NOT NULL,
  uid      VARCHAR(32) NOT NULL,
  status   TINYINT     NOT NULL DEFAULT 0 COMMENT '0 unpaid, 1 paid, 2 done, 3 cancelled, 4 refunded',
  UNIQUE KEY uk_order_sn (order_sn)
) ENGINE=InnoDB;
