-- A shop with no write-off at all: the order names only the promotion
-- (promo_id) and the member, never the coupon, and the coupon row's order
-- columns are never filled. The promotion keeps its remaining count (the
-- claim guard) and a per-member limit; expiry is its end_time, compared
-- when read and never written. use_status may be NULL (old imports).
-- Cancelling an order (by the member, or by the timeout of an unpaid one)
-- puts its coupon back to unused and closes the order (order_status 4),
-- which keeps its promotion: closed orders prove no use.
CREATE TABLE promo (
  id         BIGINT       NOT NULL PRIMARY KEY,
  name       VARCHAR(100) NULL,
  publish    INT          NULL COMMENT 'coupons to give out',
  remain     INT          NULL COMMENT 'coupons left to give out',
  per_limit  INT          NULL,
  end_time   DATETIME     NULL
) ENGINE=InnoDB;

CREATE TABLE promo_member (
  id          BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  promo_id    BIGINT      NOT NULL,
  member_id   BIGINT      NOT NULL,
  get_type    INT         NULL COMMENT '0 given by staff, 1 claimed by the member',
  use_status  INT         NULL COMMENT '0 unused, 1 used, 2 expired',
  order_sn    VARCHAR(64) NULL,
  create_time DATETIME    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  KEY idx_promo_member (promo_id, member_id)
) ENGINE=InnoDB;

CREATE TABLE sales_order (
  id        BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  order_sn  VARCHAR(64) NOT NULL,
  member_id BIGINT      NOT NULL,
  promo_id  BIGINT      NULL COMMENT 'the promotion whose coupon paid part of it',
  amount    DECIMAL(10, 2) NOT NULL,
  order_status INT        NOT NULL DEFAULT 0 COMMENT '0 unpaid, 1 paid, 2 shipped, 3 done, 4 closed, 5 invalid',
  KEY idx_promo_member (promo_id, member_id)
) ENGINE=InnoDB;
