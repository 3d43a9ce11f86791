-- Issue 28: the console for every shop.
--
-- Where each cdc process serves its /metrics, so that the API's Health
-- page finds the leading cdc's gauges (leader, Redis behind) without
-- COUPONLINK_CDC_METRICS_URL: a cdc writes its row when its metrics
-- listener is up; the API reads the row of the checkpoint's leader.
CREATE TABLE cdc_process (
  leader      VARCHAR(255) NOT NULL, -- the process, as cdc_checkpoint.leader names it (host:pid)
  checkpoint  VARCHAR(64)  NOT NULL, -- the checkpoint (a source's name with several sources) it follows
  metrics_url VARCHAR(255) NOT NULL, -- http://host:port/metrics
  started_at  DATETIME(6)  NOT NULL,
  PRIMARY KEY (leader),
  KEY idx_cdc_process_started (started_at)
) ENGINE=InnoDB;

-- A finding opened again by a person (acknowledged or closed -> open):
-- who, when and why, as for acknowledge and close.
ALTER TABLE finding
  ADD COLUMN reopened_by     VARCHAR(64)  NULL AFTER closed_reason,
  ADD COLUMN reopened_at     DATETIME(6)  NULL AFTER reopened_by,
  ADD COLUMN reopened_reason VARCHAR(512) NULL AFTER reopened_at;
