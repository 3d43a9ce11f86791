-- A shop in the style of the widely used PHP shops (CRMEB-like names):
-- every time is an int(10) of unix seconds, 0 for none. A campaign
-- (store_coupon_issue) has a budget (total_count, 0: unlimited), its own
-- remaining stock (remain_count, the claim guard; the admin form writes it
-- too), a per-member limit, a window (start_time, end_time: when its
-- coupons may be claimed and used), a status (1 on sale, 0 off the shelf,
-- -1 ended) and a soft delete (is_del). A coupon (store_coupon_user) keeps
-- its own end (end_time, copied at the claim; a cron job expires the
-- coupons past it with one bulk UPDATE). There is no write-off table: the
-- order (store_order.coupon_id) is the only evidence of a use. The
-- checkout marks the coupon used in autocommit, then writes the order in a
-- transaction of its own, which may fail. A cancel, an unpaid order's
-- timeout or a refund sets the coupon back to unused and keeps the order
-- row, soft-deleted (is_del = 1) or refunded (refund_status = 2).
CREATE TABLE store_coupon_issue (
  id            INT(10)      NOT NULL PRIMARY KEY,
  coupon_title  VARCHAR(64)  NOT NULL,
  start_time    INT(10)      NOT NULL DEFAULT 0 COMMENT 'claims open, unix seconds',
  end_time      INT(10)      NOT NULL DEFAULT 0 COMMENT 'claims and uses end, unix seconds',
  total_count   INT(10)      NOT NULL DEFAULT 0 COMMENT '0: unlimited',
  remain_count  INT(10)      NOT NULL DEFAULT 0,
  receive_limit INT(10)      NOT NULL DEFAULT 0 COMMENT 'per member, 0: no limit',
  status        TINYINT(1)   NOT NULL DEFAULT 1 COMMENT '1 on sale, 0 off the shelf, -1 ended',
  is_del        TINYINT(1)   NOT NULL DEFAULT 0,
  add_time      INT(10)      NOT NULL DEFAULT 0
) ENGINE=InnoDB;

CREATE TABLE store_coupon_user (
  id       INT(10)     NOT NULL AUTO_INCREMENT PRIMARY KEY,
  cid      INT(10)     NOT NULL COMMENT 'store_coupon_issue.id',
  uid      INT(10)     NOT NULL,
  type     VARCHAR(32) NOT NULL DEFAULT 'get' COMMENT 'get: claimed, send: sent by the admin',
  status   TINYINT(1)  NOT NULL DEFAULT 0 COMMENT '0 unused, 1 used, 2 expired',
  add_time INT(10)     NOT NULL DEFAULT 0,
  end_time INT(10)     NOT NULL DEFAULT 0 COMMENT 'its own end, unix seconds, 0: none',
  use_time INT(10)     NOT NULL DEFAULT 0,
  KEY idx_cid_uid (cid, uid),
  KEY idx_status_end (status, end_time)
) ENGINE=InnoDB;

CREATE TABLE store_order (
  id            INT(10)       NOT NULL AUTO_INCREMENT PRIMARY KEY,
  order_id      VARCHAR(32)   NOT NULL,
  uid           INT(10)       NOT NULL,
  coupon_id     INT(10)       NOT NULL DEFAULT 0 COMMENT 'store_coupon_user.id, 0: none',
  pay_price     DECIMAL(8,2)  NOT NULL DEFAULT 0,
  paid          TINYINT(1)    NOT NULL DEFAULT 0,
  refund_status TINYINT(1)    NOT NULL DEFAULT 0 COMMENT '0 none, 1 asked, 2 refunded',
  is_del        TINYINT(1)    NOT NULL DEFAULT 0 COMMENT '1: cancelled or timed out',
  add_time      INT(10)       NOT NULL DEFAULT 0,
  UNIQUE KEY uk_order_id (order_id),
  KEY idx_coupon (coupon_id)
) ENGINE=InnoDB;
