-- The checks of a shop over several servers (sources) that only the sum
-- over the sources can make, decided by one source's cdc (the judge: the
-- source that holds the template table, else the first; docs/legacy-schemas.md).

-- A source's cdc writes here, in the transaction of the batch that shows
-- it, each (coupon, order) of a write-off row that another source also
-- holds (or that it could not ask another source about): the judge reads
-- every source's rows in seq order (read only) and decides each once.
CREATE TABLE cdc_sources_mail (
  seq            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  name           VARCHAR(64)     NOT NULL,
  user_coupon_id BIGINT UNSIGNED NOT NULL,
  order_id       VARBINARY(255)  NOT NULL,
  created_at     DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (seq),
  KEY (name, seq)
) ENGINE=InnoDB;

-- The judge's decisions, written with its checkpoint: how far it has read
-- each source's mail (kind 'mail': item the source, value its last seq),
-- the templates it found over their budget on the sum (kind 'over': id
-- the template, value the coupons taken), and the (coupon, order) it found
-- written off on several sources (kind 'write_off': id the coupon, item
-- the order, value the sources beyond the first it has reported).
CREATE TABLE cdc_sources_state (
  name  VARCHAR(64)    NOT NULL,
  kind  VARCHAR(16)    NOT NULL,
  id    BIGINT         NOT NULL,
  item  VARBINARY(255) NOT NULL,
  value BIGINT         NOT NULL,
  PRIMARY KEY (name, kind, id, item)
) ENGINE=InnoDB;
