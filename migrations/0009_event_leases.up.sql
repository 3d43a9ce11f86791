-- Issue 32: the event sinks' and the webhook dispatcher's leases follow the
-- cdc's leadership. A lease carries the checkpoint (cdc_checkpoint.name) and
-- the leader epoch (cdc_checkpoint.epoch) of the cdc that took it: a cdc
-- leading the same checkpoint under a higher epoch takes it at once, and
-- the writes of a holder under a lower epoch are refused. Epochs of
-- different checkpoints (the cdcs of several sources) are not compared.
ALTER TABLE event_sink_position
  ADD COLUMN lease_checkpoint VARCHAR(64) NOT NULL DEFAULT '' AFTER lease_until,
  ADD COLUMN lease_epoch BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER lease_checkpoint;

-- The lease of a pending row a webhook round claimed (lease_epoch 0: not
-- claimed, or claimed by a dispatcher that does not follow a leader).
ALTER TABLE webhook_outbox
  ADD COLUMN lease_checkpoint VARCHAR(64) NOT NULL DEFAULT '' AFTER next_attempt_at,
  ADD COLUMN lease_epoch BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER lease_checkpoint,
  ADD KEY idx_webhook_lease (lease_epoch);
