-- The console's trends (GET /v1/templates/{id}/trends): claims,
-- redemptions and releases per minute over the last hours, each read by a
-- range of one of these indexes, (template, time), covering the channel:
-- the rows of the window only, never the whole ledger. Insert-only
-- columns: a claim, a redemption or a release writes one more index entry
-- and no later update moves it.
ALTER TABLE user_coupon ADD KEY idx_user_coupon_tpl_claimed (template_id, claimed_at, channel);
ALTER TABLE redemption_log ADD KEY idx_redemption_tpl_at (template_id, redeemed_at, channel);
ALTER TABLE inventory_flow ADD KEY idx_inventory_flow_tpl_kind_at (template_id, kind, created_at, channel);
