-- couponlink's MySQL/MariaDB users with least privileges.
--
-- Placeholders, replaced before running (sed, or the test in this folder):
--   couponlink_db            the database couponlink migrates (the DSN's database)
--   __CDC_PASSWORD__, __API_PASSWORD__, __RECONCILE_PASSWORD__
-- The user names (couponlink_cdc, couponlink_api, couponlink_reconcile) may
-- be renamed the same way. Run as an administrator AFTER `couponlink migrate`
-- (column grants need the tables to exist):
--
--   sed -e 's/couponlink_db/couponlink/g' -e "s/__CDC_PASSWORD__/$CDC_PW/" ... \
--     deploy/mysql/grants.sql | mariadb -uroot
--
-- `couponlink migrate` itself runs as an administrator (it creates the
-- database and tables: DDL); none of these three users can change the schema.
--
-- The global (binlog) privileges differ per server: the file runs as is
-- on MariaDB (its section is live); on Oracle MySQL, comment out the
-- "flavor: MariaDB" section and uncomment the one of your version (drop
-- the leading "-- " of its GRANT lines). Everything else is the same on
-- every flavor. Tested (deploy/mysql/grants_test.go) on MariaDB 10.11
-- only: no Oracle MySQL server can be installed where couponlink is
-- tested, so the MySQL sections are checked for their privileges, never
-- run against MySQL.
--
-- The snapshot (the cdc's bootstrap and -rebuild, the reconciler's truth)
-- takes its binlog position without any lock on MariaDB (and Percona
-- Server). On Oracle MySQL it takes FLUSH TABLES WITH READ LOCK for a few
-- milliseconds (RELOAD); where RELOAD is not granted (managed MySQL), it
-- falls back to LOCK TABLES ... READ on the mapped tables (LOCK TABLES and
-- SELECT on their schema). Grant one of the two. docs/servers.md "Snapshot
-- positions" has the guarantees and costs.
--
-- The tables couponlink reads are all in couponlink_db for the reference
-- schema, so SELECT is granted on couponlink_db.*. With a legacy -mapping,
-- also grant SELECT on the mapped source tables in their schema.

-- ---------------------------------------------------------------------------
-- couponlink_cdc: tails the binlog (couponlink cdc; also `couponlink status`).
-- ---------------------------------------------------------------------------
CREATE USER IF NOT EXISTS 'couponlink_cdc'@'%' IDENTIFIED BY '__CDC_PASSWORD__';
-- read the binlog (REPLICATION SLAVE) and the binlog position / GTID.
--
-- == flavor: MariaDB 10.5.2+ (live; tested) ==
-- SHOW MASTER STATUS and BINLOG_GTID_POS need BINLOG MONITOR (before
-- 10.5.2: REPLICATION CLIENT). REPLICATION SLAVE may be spelled
-- REPLICATION REPLICA from 10.5.1. No snapshot lock: binlog_snapshot_%.
GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'couponlink_cdc'@'%';
-- (COUPONLINK_SNAPSHOT_POSITION=lock on MariaDB also needs RELOAD, or
-- LOCK TABLES on the schema, like MySQL.)
--
-- == flavor: MySQL 5.7 / 8.0 (untested) ==
-- SHOW MASTER STATUS and gtid_executed: REPLICATION CLIENT. The snapshot
-- lock: RELOAD (FLUSH TABLES WITH READ LOCK), or, without it, LOCK TABLES.
-- GRANT REPLICATION SLAVE, REPLICATION CLIENT, RELOAD ON *.* TO 'couponlink_cdc'@'%';
-- managed MySQL without RELOAD, instead of the line above:
-- GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'couponlink_cdc'@'%';
-- GRANT LOCK TABLES ON `couponlink_db`.* TO 'couponlink_cdc'@'%';
--
-- == flavor: MySQL 8.4 (untested) ==
-- 8.4 renamed the statements (SHOW BINARY LOG STATUS, SHOW REPLICA
-- STATUS), not these privileges: SHOW BINARY LOG STATUS needs
-- REPLICATION CLIENT, a binlog reader REPLICATION SLAVE.
-- GRANT REPLICATION SLAVE, REPLICATION CLIENT, RELOAD ON *.* TO 'couponlink_cdc'@'%';
-- managed MySQL without RELOAD, instead of the line above:
-- GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'couponlink_cdc'@'%';
-- GRANT LOCK TABLES ON `couponlink_db`.* TO 'couponlink_cdc'@'%';
--
-- == every flavor ==
-- the source tables (user_coupon, redemption_log, inventory_flow,
-- coupon_template, channel_quota) for the snapshot of -rebuild and the
-- derived state; correction_log (the reconciler's corrections it must see).
GRANT SELECT ON `couponlink_db`.* TO 'couponlink_cdc'@'%';
-- couponlink's own tables: counters (the bootstrap and -rebuild delete
-- them), checkpoint (created once, then updated with the leader epoch),
-- anomalies (append-only). Deleting a checkpoint or anomalies is an
-- operator's act, as an administrator.
GRANT SELECT, INSERT, UPDATE, DELETE ON `couponlink_db`.`inventory_counter` TO 'couponlink_cdc'@'%';
GRANT SELECT, INSERT, UPDATE ON `couponlink_db`.`cdc_checkpoint` TO 'couponlink_cdc'@'%';
GRANT SELECT, INSERT ON `couponlink_db`.`cdc_anomaly` TO 'couponlink_cdc'@'%';
-- coupon_template: the cached counts only.
GRANT UPDATE (`issued_count`, `used_count`, `expired_count`) ON `couponlink_db`.`coupon_template` TO 'couponlink_cdc'@'%';
-- releases (a void, a refund that recycles, an expiry under the release
-- policy give the slot back): claimed - 1 and the release row in the ledger.
GRANT UPDATE (`claimed`, `quota`, `version`) ON `couponlink_db`.`channel_quota` TO 'couponlink_cdc'@'%';
GRANT INSERT ON `couponlink_db`.`quota_transfer_log` TO 'couponlink_cdc'@'%';
GRANT INSERT, UPDATE ON `couponlink_db`.`quota_policy` TO 'couponlink_cdc'@'%';
GRANT INSERT ON `couponlink_db`.`quota_policy_audit` TO 'couponlink_cdc'@'%';
GRANT INSERT, UPDATE, DELETE ON `couponlink_db`.`webhook_outbox` TO 'couponlink_cdc'@'%';
GRANT INSERT, UPDATE ON `couponlink_db`.`event_sink_position` TO 'couponlink_cdc'@'%';
GRANT INSERT ON `couponlink_db`.`inventory_flow` TO 'couponlink_cdc'@'%';
GRANT INSERT, DELETE ON `couponlink_db`.`release_due` TO 'couponlink_cdc'@'%';
-- an anomaly is also a finding (open, or seen again), in the batch's
-- transaction; where this process serves its metrics, for the console.
GRANT INSERT, UPDATE ON `couponlink_db`.`finding` TO 'couponlink_cdc'@'%';
GRANT INSERT, UPDATE ON `couponlink_db`.`cdc_process` TO 'couponlink_cdc'@'%';
-- the leader lock (GET_LOCK / IS_USED_LOCK / RELEASE_LOCK) needs no privilege.
-- Nothing on user_coupon, user_claim, redemption_log, void_request beyond
-- SELECT, and no DDL anywhere.

-- ---------------------------------------------------------------------------
-- couponlink_api: the HTTP write API (and `couponlink expire`).
-- ---------------------------------------------------------------------------
CREATE USER IF NOT EXISTS 'couponlink_api'@'%' IDENTIFIED BY '__API_PASSWORD__';
-- reads: coupons, history, inventory (incl. inventory_counter and
-- cdc_checkpoint for the derived view).
GRANT SELECT ON `couponlink_db`.* TO 'couponlink_api'@'%';
-- writes: one transaction per state change with its ledger row. The API
-- never deletes (the ledger is append-only), so no DELETE.
GRANT INSERT, UPDATE ON `couponlink_db`.`coupon_template` TO 'couponlink_api'@'%';
GRANT INSERT, UPDATE ON `couponlink_db`.`channel_quota` TO 'couponlink_api'@'%';
GRANT INSERT, UPDATE ON `couponlink_db`.`user_coupon` TO 'couponlink_api'@'%';
GRANT INSERT, UPDATE ON `couponlink_db`.`user_claim` TO 'couponlink_api'@'%';
GRANT INSERT, UPDATE ON `couponlink_db`.`redemption_log` TO 'couponlink_api'@'%';
GRANT INSERT, UPDATE ON `couponlink_db`.`inventory_flow` TO 'couponlink_api'@'%';
GRANT INSERT, UPDATE ON `couponlink_db`.`void_request` TO 'couponlink_api'@'%';
GRANT INSERT, UPDATE, DELETE ON `couponlink_db`.`quota_policy` TO 'couponlink_api'@'%';
GRANT INSERT ON `couponlink_db`.`quota_policy_audit` TO 'couponlink_api'@'%';
-- a person acknowledges, closes or reopens a finding.
GRANT UPDATE ON `couponlink_db`.`finding` TO 'couponlink_api'@'%';

-- ---------------------------------------------------------------------------
-- couponlink_reconcile: the reconciler (couponlink reconcile).
-- ---------------------------------------------------------------------------
CREATE USER IF NOT EXISTS 'couponlink_reconcile'@'%' IDENTIFIED BY '__RECONCILE_PASSWORD__';
-- it replays the binlog to the compared position and reads the position;
-- its truth is a snapshot like the cdc's bootstrap (the same lock on MySQL).
--
-- == flavor: MariaDB 10.5.2+ (live; tested) ==
GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'couponlink_reconcile'@'%';
--
-- == flavor: MySQL 5.7 / 8.0 (untested) ==
-- GRANT REPLICATION SLAVE, REPLICATION CLIENT, RELOAD ON *.* TO 'couponlink_reconcile'@'%';
-- managed MySQL without RELOAD, instead of the line above:
-- GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'couponlink_reconcile'@'%';
-- GRANT LOCK TABLES ON `couponlink_db`.* TO 'couponlink_reconcile'@'%';
--
-- == flavor: MySQL 8.4 (untested) ==
-- GRANT REPLICATION SLAVE, REPLICATION CLIENT, RELOAD ON *.* TO 'couponlink_reconcile'@'%';
-- managed MySQL without RELOAD, instead of the line above:
-- GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'couponlink_reconcile'@'%';
-- GRANT LOCK TABLES ON `couponlink_db`.* TO 'couponlink_reconcile'@'%';
--
-- == every flavor ==
GRANT SELECT ON `couponlink_db`.* TO 'couponlink_reconcile'@'%';
-- fixes: counters by the difference, the template cache, its own records.
GRANT SELECT, INSERT, UPDATE ON `couponlink_db`.`inventory_counter` TO 'couponlink_reconcile'@'%';
GRANT UPDATE (`issued_count`, `used_count`, `expired_count`) ON `couponlink_db`.`coupon_template` TO 'couponlink_reconcile'@'%';
GRANT SELECT, INSERT, UPDATE ON `couponlink_db`.`reconcile_task` TO 'couponlink_reconcile'@'%';
GRANT SELECT, INSERT ON `couponlink_db`.`correction_log` TO 'couponlink_reconcile'@'%';
-- what a pass found or corrected is a finding (open, or seen again).
GRANT INSERT, UPDATE ON `couponlink_db`.`finding` TO 'couponlink_reconcile'@'%';
-- a pass that needs a person writes a reconcile.needs_review event with its task.
GRANT INSERT ON `couponlink_db`.`webhook_outbox` TO 'couponlink_reconcile'@'%';
-- its single-pass lock (GET_LOCK) needs no privilege.
