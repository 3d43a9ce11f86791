-- A shop with a per-coupon write-off table: the cashier's system writes one
-- coupon_writeoff row per coupon it accepts, in the transaction that marks
-- the coupon used. The campaign keeps its own remaining stock (the claim
-- guard: stock_left = stock_left - 1 WHERE stock_left > 0), a per-member
-- limit and an end time. Statuses are two-digit codes.
CREATE TABLE campaign (
  id             BIGINT       NOT NULL PRIMARY KEY,
  title          VARCHAR(128) NOT NULL,
  stock_total    INT          NOT NULL,
  stock_left     INT          NOT NULL,
  limit_per_user INT          NULL,
  ends_at        DATETIME     NULL
) ENGINE=InnoDB;

CREATE TABLE coupon (
  id          BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  campaign_id BIGINT      NOT NULL,
  member_id   BIGINT      NOT NULL,
  source      TINYINT     NOT NULL COMMENT '1 app, 2 mini program, 3 store',
  state       TINYINT     NOT NULL COMMENT '10 unused, 20 used, 30 expired, 40 voided',
  order_no    VARCHAR(32) NULL,
  claimed_at  DATETIME    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  KEY idx_campaign_member (campaign_id, member_id),
  KEY idx_campaign_source_state (campaign_id, source, state)
) ENGINE=InnoDB;

CREATE TABLE coupon_writeoff (
  id         BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  coupon_id  BIGINT      NOT NULL,
  order_no   VARCHAR(32) NOT NULL,
  store_id   INT         NOT NULL,
  created_at DATETIME    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  KEY idx_coupon (coupon_id)
) ENGINE=InnoDB;
