-- An anomaly names a coupon's states twice: in couponlink's states (the
-- numbers from_status/to_status, 1 AVAILABLE .. 4 RETURNED, and now their
-- names from_state/to_state) and in the codes the source table stored
-- (from_code/to_code), so that a legacy shop's 0 -> 1 is not misread as
-- couponlink's 1 -> 2. A code is NULL where there is none (the from of an
-- insert, the to of a delete) or it is not known (rows written before this
-- migration; a state the mapping gives several codes, when the check that
-- found it did not keep the image).
ALTER TABLE cdc_anomaly
  ADD COLUMN from_state VARCHAR(16) NULL AFTER to_status,
  ADD COLUMN to_state   VARCHAR(16) NULL AFTER from_state,
  ADD COLUMN from_code  BIGINT      NULL AFTER to_state,
  ADD COLUMN to_code    BIGINT      NULL AFTER from_code;

-- the names of the rows already recorded follow from their numbers
UPDATE cdc_anomaly
   SET from_state = ELT(from_status, 'AVAILABLE', 'USED', 'EXPIRED', 'RETURNED'),
       to_state   = ELT(to_status, 'AVAILABLE', 'USED', 'EXPIRED', 'RETURNED')
 WHERE from_status IS NOT NULL OR to_status IS NOT NULL;
