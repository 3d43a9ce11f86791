-- Issue 38 (expiry by the shop's rule): the template rules the cdc keeps
-- with its checkpoint also say whether the campaign's coupons follow its
-- current window (template.fixed_window) rather than their own expiry, and
-- when that window opens (template.start_time), so a replay judges each use
-- by the rule in force there.
ALTER TABLE cdc_template_state
  ADD COLUMN fixed_window TINYINT(1) NOT NULL DEFAULT 0,
  ADD COLUMN start_time DATETIME(6) NULL;
