-- The cdc's durable state of a legacy shop's template rules, per
-- checkpoint (name), written in the transaction of the batch that changes
-- it, with the checkpoint: a replay after a crash neither loses nor
-- repeats an anomaly.

-- Per (template, user): how many coupons of the template the user holds
-- as the binlog shows them (coupons entering the counted set minus those
-- leaving it; a key at 0 is deleted). A coupon that enters while its key
-- is at the template's per-user limit or over it is per_user_limit_exceeded.
-- Written only for a mapping that names template.per_user_limit and
-- user_coupon.user. A bootstrap rewrites a checkpoint's keys from its
-- snapshot.
CREATE TABLE cdc_user_claim (
  name        VARCHAR(64)     NOT NULL,
  template_id BIGINT          NOT NULL,
  user_id     VARBINARY(255)  NOT NULL,
  coupons     INT UNSIGNED    NOT NULL,
  PRIMARY KEY (name, template_id, user_id)
) ENGINE=InnoDB;

-- Per template: its budget (NULL: none), per-user limit (0: none) and end
-- time (NULL: none) in force at the checkpoint, so that a restart judges
-- the binlog it replays by the rules in force at each point, not by the
-- template table as it is at the restart. Seeded by a bootstrap from its
-- snapshot, followed from the binlog after that. Written only for a
-- legacy mapping that follows its template table.
CREATE TABLE cdc_template_state (
  name           VARCHAR(64) NOT NULL,
  template_id    BIGINT      NOT NULL,
  budget         BIGINT      NULL,
  per_user_limit BIGINT      NOT NULL,
  end_time       DATETIME(6) NULL,
  PRIMARY KEY (name, template_id)
) ENGINE=InnoDB;
