-- Issue 27 (campaigns as shops store them): the template rules the cdc
-- keeps with its checkpoint also say whether the campaign's budget means
-- no limit (template.unlimited) and whether it is off the shelf
-- (template.status or template.deleted): a coupon claimed then is a
-- claimed_off_shelf anomaly, judged on replay by the state in force there.
ALTER TABLE cdc_template_state
  ADD COLUMN unlimited TINYINT(1) NOT NULL DEFAULT 0,
  ADD COLUMN off_shelf TINYINT(1) NOT NULL DEFAULT 0;
