package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"time"
)

// Replicate makes m a GTID replica of primary (CHANGE MASTER TO ...
// MASTER_USE_GTID=slave_pos, as root) and starts it: m replays the
// primary's binlog from its start (a fresh primary's binlog holds all its
// history) and logs every replicated transaction in its own binlog under
// its original GTID (log_slave_updates, same gtid_domain_id 0). m is
// read_only from now on, as a replica is (root bypasses it; other users
// do not).
func (m *MariaDB) Replicate(primary *MariaDB) {
	m.t.Helper()
	host, port, _ := net.SplitHostPort(primary.Addr)
	m.exec("SET GLOBAL read_only = ON")
	m.exec(fmt.Sprintf("CHANGE MASTER TO MASTER_HOST = '%s', MASTER_PORT = %s, MASTER_USER = 'root', MASTER_PASSWORD = '', "+
		"MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1", host, port))
	m.exec("START SLAVE")
}

// WaitReplicated waits until m has applied everything of primary's binlog
// as of the call (MASTER_GTID_WAIT on the primary's gtid_binlog_pos).
func (m *MariaDB) WaitReplicated(primary *MariaDB, within time.Duration) {
	m.t.Helper()
	var pos string
	primary.query("SELECT @@gtid_binlog_pos", &pos)
	var got int
	m.query(fmt.Sprintf("SELECT MASTER_GTID_WAIT('%s', %d)", pos, int(within.Seconds())), &got)
	if got != 0 {
		m.t.Fatalf("the replica did not apply the primary's %s within %s", pos, within)
	}
}

// WaitRelayApplied waits until m's SQL thread has applied every event its
// IO thread received (its primary may be dead: the IO thread retries,
// Read_Master_Log_Pos stays), and returns the GTID position m applied.
func (m *MariaDB) WaitRelayApplied(within time.Duration) string {
	m.t.Helper()
	deadline := time.Now().Add(within)
	for {
		st := m.slaveStatus()
		// everything read is applied; or the IO thread was stopped inside a
		// transaction, whose incomplete tail the SQL thread never applies
		// (it has read all the relay log and waits for more)
		applied := st["Master_Log_File"] == st["Relay_Master_Log_File"] && st["Read_Master_Log_Pos"] == st["Exec_Master_Log_Pos"]
		stalled := st["Slave_IO_Running"] == "No" && strings.Contains(st["Slave_SQL_Running_State"], "has read all relay log")
		if applied || stalled {
			var pos string
			m.query("SELECT @@gtid_slave_pos", &pos)
			return pos
		}
		if st["Last_SQL_Error"] != "" {
			m.t.Fatalf("the replica's SQL thread failed: %s", st["Last_SQL_Error"])
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("the replica did not apply its relay log within %s: %v", within, st)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

// Promote makes the replica m a primary: STOP SLAVE; RESET SLAVE ALL;
// read_only off.
func (m *MariaDB) Promote() {
	m.t.Helper()
	m.exec("STOP SLAVE")
	m.exec("RESET SLAVE ALL")
	m.exec("SET GLOBAL read_only = OFF")
}

// slaveStatus is SHOW SLAVE STATUS as column -> value.
func (m *MariaDB) slaveStatus() map[string]string {
	m.t.Helper()
	db := m.open()
	defer db.Close()
	rows, err := db.Query("SHOW SLAVE STATUS")
	if err != nil {
		m.t.Fatalf("SHOW SLAVE STATUS: %v", err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	out := map[string]string{}
	if !rows.Next() {
		m.t.Fatalf("SHOW SLAVE STATUS: not a replica (%v)", rows.Err())
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		m.t.Fatalf("SHOW SLAVE STATUS: %v", err)
	}
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out
}

func (m *MariaDB) open() *sql.DB {
	m.t.Helper()
	db, err := sql.Open("mysql", m.ServerDSN)
	if err != nil {
		m.t.Fatalf("open %s: %v", m.ServerDSN, err)
	}
	return db
}

func (m *MariaDB) exec(q string) {
	m.t.Helper()
	db := m.open()
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, q); err != nil {
		m.t.Fatalf("%s on %s: %v", q, m.Addr, err)
	}
}

func (m *MariaDB) query(q string, dest any) {
	m.t.Helper()
	db := m.open()
	defer db.Close()
	if err := db.QueryRow(q).Scan(dest); err != nil {
		m.t.Fatalf("%s on %s: %v", q, m.Addr, err)
	}
}

// StopReplicationIO stops m's IO thread: m receives nothing more from its
// primary (what it received is still applied), as when the network
// between them fails.
func (m *MariaDB) StopReplicationIO() {
	m.t.Helper()
	m.exec("STOP SLAVE IO_THREAD")
}
