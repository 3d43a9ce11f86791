package httpapi

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unreachable is true for a connection to MySQL that could not be opened
// or broke, however wrapped, and false for every other error.
func TestUnreachable(t *testing.T) {
	_, refused := net.Dial("tcp", "127.0.0.1:1")
	require.Error(t, refused)
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, err := range []error{
		refused,
		fmt.Errorf("claim: %w", refused),
		timeout,
		reset,
		driver.ErrBadConn,
		fmt.Errorf("begin: %w", driver.ErrBadConn),
		mysql.ErrInvalidConn,
		fmt.Errorf("commit: %w", mysql.ErrInvalidConn),
		os.NewSyscallError("connect", syscall.ECONNREFUSED),
		errors.Join(errors.New("rollback"), mysql.ErrInvalidConn),
	} {
		assert.True(t, unreachable(err), "%v", err)
	}
	for _, err := range []error{
		nil,
		errors.New("a bug"),
		sql.ErrNoRows,
		sql.ErrTxDone,
		sql.ErrConnDone,
		&mysql.MySQLError{Number: 1213, Message: "Deadlock found"},
		&mysql.MySQLError{Number: 1146, Message: "Table doesn't exist"},
		context.DeadlineExceeded,
		context.Canceled,
		fmt.Errorf("query: %w", context.DeadlineExceeded),
	} {
		assert.False(t, unreachable(err), "%v", err)
	}
}
