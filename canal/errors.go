package canal

import (
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// ErrBinlogPurged means the server cannot stream from the requested
// position: the binlog file was purged, or the GTID is not in its binlog
// (MySQL/MariaDB ERROR 1236). The counters must then be rebuilt from a
// snapshot: `couponlink cdc --rebuild`.
var ErrBinlogPurged = errors.New("binlog position is no longer available on the server")

// ErrSchemaChanged means a row event does not fit the current definition of
// its table: the tailer is replaying binlog written before an ALTER of a
// source table. Replay across such an ALTER is refused; rebuild instead.
var ErrSchemaChanged = errors.New("source table definition changed since the binlog was written")

// errRebuildHint is the operator's way out of both errors above.
const errRebuildHint = "run `couponlink cdc --rebuild` to rebuild the counters from a consistent snapshot and restart from its position"

// wrapPurged turns a server ERROR 1236 into an error wrapping
// ErrBinlogPurged; any other error is returned unchanged.
func wrapPurged(err error, from Position) error {
	var me *mysql.MyError
	if !errors.As(err, &me) || me.Code != mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG {
		return err
	}
	return fmt.Errorf("start binlog stream at %s: %w: server said %q; %s", from, ErrBinlogPurged, me.Message, errRebuildHint)
}

// isFatalServerError reports whether err is an error the server sent that
// retrying would not cure (access denied, unknown binlog, ...), as opposed to
// a network failure or a server going away.
func isFatalServerError(err error) bool {
	var me *mysql.MyError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Code {
	case mysql.ER_CON_COUNT_ERROR, mysql.ER_SERVER_SHUTDOWN, mysql.ER_ABORTING_CONNECTION,
		mysql.ER_NET_READ_ERROR, mysql.ER_NET_READ_INTERRUPTED, mysql.ER_NET_ERROR_ON_WRITE,
		mysql.ER_NET_WRITE_INTERRUPTED, mysql.ER_QUERY_INTERRUPTED, erConnectionKilled:
		return false
	}
	return true
}

const erConnectionKilled = 1927 // MariaDB ER_CONNECTION_KILLED
