-- Issue 32: the event sinks' and the webhook dispatcher's leases follow the
-- cdc's leadership. A lease carries the leader epoch (cdc_checkpoint.epoch)
-- of the cdc that took it: a cdc leading under a higher epoch takes it at
-- once, and the writes of a holder under a lower epoch are refused.
ALTER TABLE event_sink_position
  ADD COLUMN lease_epoch BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER lease_until;

-- lease_epoch: the epoch of the round that claimed a pending row (0: not
-- claimed, or claimed by a dispatcher that does not follow a leader).
ALTER TABLE webhook_outbox
  ADD COLUMN lease_epoch BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER next_attempt_at,
  ADD KEY idx_webhook_lease (lease_epoch);
