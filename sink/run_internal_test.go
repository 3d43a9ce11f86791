package sink

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"

	"github.com/couponlink/couponlink/canal"
)

// fatal tells what a restart cannot fix from what waiting cures.
func TestFatalTellsPermanentFromTransient(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	mappingErr := errors.New("mapping: user_coupon.table names x.y but there is no such table")
	for name, tc := range map[string]struct {
		err  error
		want string // "" for transient
	}{
		"connection refused":             {fmt.Errorf("read database name: %w", refused), ""},
		"check while the server is down": {&checkError{errors.Join(mappingErr, fmt.Errorf("check mapping: %w", refused))}, ""},
		"server shutting down":           {&mysql.MySQLError{Number: 1053, Message: "Server shutdown in progress"}, ""},
		"deadlock":                       {fmt.Errorf("apply batch: %w", &mysql.MySQLError{Number: 1213}), ""},
		"binlog stream killed":           {&gomysql.MyError{Code: 1927}, ""},
		"fenced":                         {fmt.Errorf("apply batch: %w", ErrFenced), ""},
		"leader lock lost":               {errLeaderLost, ""},
		"wrong password":                 {fmt.Errorf("read database name: %w", &mysql.MySQLError{Number: 1045}), "MySQL refused"},
		"table privilege revoked":        {fmt.Errorf("apply batch: %w", &mysql.MySQLError{Number: 1142}), "MySQL refused"},
		"no replication privilege":       {fmt.Errorf("canal: binlog stream: %w", &gomysql.MyError{Code: 1227}), "MySQL refused"},
		"unknown database":               {&mysql.MySQLError{Number: 1049}, "couponlink migrate"},
		"a mapped table is missing":      {&checkError{mappingErr}, "the mapping or the server's binlog settings are wrong"},
		"binlog_format is STATEMENT":     {&checkError{errors.New("server: binlog_format is STATEMENT, couponlink needs ROW")}, "binlog settings are wrong"},
		"purged binlog":                  {fmt.Errorf("canal: %w", canal.ErrBinlogPurged), "--rebuild"},
		"replay across an ALTER":         {fmt.Errorf("canal: %w", canal.ErrSchemaChanged), "--rebuild"},
	} {
		got := fatal(tc.err)
		if tc.want == "" {
			assert.NoError(t, got, name)
			continue
		}
		if assert.Error(t, got, name) {
			assert.Contains(t, got.Error(), tc.want, name)
			assert.ErrorIs(t, got, tc.err, name)
		}
	}
}
