-- The cdc's schedule of releases it owes: one row per EXPIRED coupon of a
-- template under the release policy, due when its cooldown after
-- expires_at is over; and, from a bootstrap, per RETURNED coupon whose void
-- or recycle happened before it, due at once. The cdc writes a row in the
-- transaction of the batch that saw the expiry (exactly-once with the
-- checkpoint) and deletes it when it releases the slot, so finding due
-- releases is a range read of due rows only, never a scan of every expired
-- coupon.
CREATE TABLE release_due (
  user_coupon_id BIGINT UNSIGNED NOT NULL,
  template_id    BIGINT UNSIGNED NOT NULL,
  channel        VARCHAR(64)     NOT NULL,
  due_at         DATETIME(6)     NOT NULL,
  PRIMARY KEY (user_coupon_id),
  KEY idx_release_due_at (due_at)
) ENGINE=InnoDB;

-- Expired coupons of release templates not released yet, from before this
-- table existed.
INSERT IGNORE INTO release_due (user_coupon_id, template_id, channel, due_at)
SELECT c.id, c.template_id, c.channel, c.expires_at + INTERVAL t.release_cooldown_seconds SECOND
FROM user_coupon c JOIN coupon_template t ON t.id = c.template_id
WHERE c.status = 3 AND t.expiry_policy = 'release'
  AND NOT EXISTS (SELECT 1 FROM inventory_flow f WHERE f.user_coupon_id = c.id AND f.kind = 'release' AND f.seq = 0);

-- Coupons voided or recycled before the cdc's first bootstrap: their slots
-- are owed too, at once.
INSERT IGNORE INTO release_due (user_coupon_id, template_id, channel, due_at)
SELECT c.id, c.template_id, c.channel, UTC_TIMESTAMP(6)
FROM user_coupon c
WHERE c.status = 4
  AND NOT EXISTS (SELECT 1 FROM inventory_flow f WHERE f.user_coupon_id = c.id AND f.kind = 'release' AND f.seq = 0);
