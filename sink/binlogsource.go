package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The binlog source (Config.BinlogDB) may be a replica of the server the
// counters are written on. The checkpoint's GTID set then names
// transactions of the primary as the replica logged them: with
// log_slave_updates the replica writes every replicated transaction to its
// own binlog under its original GTID (domain, server id and sequence
// number of the primary), so the set means the same point on both servers
// and on any replica promoted later. Without log_slave_updates the
// replica's binlog holds none of the primary's transactions: refused.

// serverIdentity is what tells two servers apart, and whether a replica
// logs what it replicates.
type serverIdentity struct {
	serverID        int64
	logSlaveUpdates bool
	readOnly        bool
	hostPort        string
}

func readIdentity(ctx context.Context, db *sql.DB) (serverIdentity, error) {
	var id serverIdentity
	var host string
	var port int64
	err := db.QueryRowContext(ctx, "SELECT @@server_id, @@log_slave_updates, @@read_only, @@hostname, @@port").
		Scan(&id.serverID, &id.logSlaveUpdates, &id.readOnly, &host, &port)
	if err != nil {
		return id, fmt.Errorf("read server identity: %w", err)
	}
	id.hostPort = fmt.Sprintf("%s:%d", host, port)
	return id, nil
}

// checkBinlogSource checks a binlog source other than the counters' server:
// another server must log what it replicates (log_slave_updates). The
// same server reached by another address passes.
func checkBinlogSource(ctx context.Context, db, binlog *sql.DB) error {
	if binlog == db {
		return nil
	}
	w, err := readIdentity(ctx, db)
	if err != nil {
		return fmt.Errorf("the counters' server: %w", err)
	}
	b, err := readIdentity(ctx, binlog)
	if err != nil {
		return fmt.Errorf("the binlog source: %w", err)
	}
	if w == b {
		return nil
	}
	if w.serverID == b.serverID {
		return fmt.Errorf("the binlog source (%s) and the counters' server (%s) have the same server_id %d: give every server of the topology its own",
			b.hostPort, w.hostPort, b.serverID)
	}
	if !b.logSlaveUpdates {
		return errors.New("the binlog source is another server without log_slave_updates: its binlog does not hold the transactions it replicates; set log_slave_updates=ON on it (and restart it), or read the binlog of the counters' server")
	}
	if w.readOnly {
		return fmt.Errorf("the counters' server (%s) is read_only: the DSN must name the primary, where the counters and the checkpoint are written (the binlog DSN names the replica)", w.hostPort)
	}
	return nil
}
