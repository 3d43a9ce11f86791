-- Evidence states (a write-off table whose rows a shop closes, e.g. its
-- orders table): of a (coupon, order)'s live rows, how many already proved
-- a use of the coupon. A live row proves one use: the coupon given back
-- and used again needs another. Written in the batch's transaction with
-- the checkpoint, like row_count; never more than row_count.
ALTER TABLE cdc_redemption_key ADD COLUMN proved INT UNSIGNED NOT NULL DEFAULT 0;
