-- Issue 41: who a person with a token acted for. With a token, an audit
-- row's actor column (operator, changed_by, resolved_by, a finding's
-- acknowledged_by, closed_by, reopened_by) records the token's name; the
-- body's own operator or changed_by, when it names someone else, goes
-- in on_behalf_of (a reconcile task's resolved_on_behalf_of, a finding's
-- one per move, as its *_by columns) (NULL: the same name, or no token).
-- The free text (reason, note) is kept as the person wrote it.
ALTER TABLE void_request       ADD COLUMN on_behalf_of VARCHAR(64) NULL AFTER operator;
ALTER TABLE inventory_flow     ADD COLUMN on_behalf_of VARCHAR(64) NULL AFTER operator;
ALTER TABLE quota_policy_audit ADD COLUMN on_behalf_of VARCHAR(64) NULL AFTER changed_by;
ALTER TABLE reconcile_task     ADD COLUMN resolved_on_behalf_of VARCHAR(64) NULL AFTER resolved_by;
ALTER TABLE correction_log     ADD COLUMN on_behalf_of VARCHAR(64) NULL AFTER actor;
ALTER TABLE finding
  ADD COLUMN acknowledged_on_behalf_of VARCHAR(64) NULL AFTER acknowledged_by,
  ADD COLUMN closed_on_behalf_of       VARCHAR(64) NULL AFTER closed_by,
  ADD COLUMN reopened_on_behalf_of     VARCHAR(64) NULL AFTER reopened_by;
