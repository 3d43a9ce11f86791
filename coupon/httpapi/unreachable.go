package httpapi

import (
	"database/sql/driver"
	"errors"
	"net"
	"syscall"

	"github.com/go-sql-driver/mysql"
)

// unreachable reports whether err means that MySQL cannot be reached: a
// connection that could not be opened (refused, timed out, no route to
// the server, a name that does not resolve) or that broke under a
// statement. The request may succeed once MySQL is back (503
// unavailable). Any other error of the database (a statement it refuses,
// a lock wait) is not one: that is a bug or a failure to look into (500
// internal).
func unreachable(err error) bool {
	var op *net.OpError
	switch {
	case err == nil:
		return false
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, syscall.ECONNREFUSED):
		return true
	case errors.As(err, &op): // a dial, read or write of the connection
		return true
	}
	return false
}
