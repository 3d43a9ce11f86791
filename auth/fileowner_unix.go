//go:build unix

package auth

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// checkFileSafe refuses a token file that someone other than this
// process's user (or root) could change: one writable by its group or by
// everyone, or owned by another user. Whoever may write the file may add
// a token of their own.
func checkFileSafe(file string, fi os.FileInfo) error {
	if mode := fi.Mode().Perm(); mode&0o022 != 0 {
		return fmt.Errorf("%w: %s is writable by its group or by everyone (mode %04o), so anyone who may write it could add a token: "+
			"`chmod go-w %s` (or `chmod 600 %s`)", ErrUnsafeFile, file, mode, file, file)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	euid := os.Geteuid()
	if owner := int(st.Uid); owner != euid && owner != 0 {
		return fmt.Errorf("%w: %s is owned by uid %d, neither the user couponlink runs as (%s) nor root, so that user could add a token: "+
			"`chown %s %s`", ErrUnsafeFile, file, owner, userName(euid), userName(euid), file)
	}
	return nil
}

// userName is uid's name, or the number when it has none.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return u.Username
	}
	return strconv.Itoa(uid)
}
