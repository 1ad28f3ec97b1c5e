//go:build unix

package bridge

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// openAuditFile opens the audit file for appending, creating it owner-only
// if it does not exist. It never follows a symbolic link at the path, and
// refuses a file that is not regular, has another hard link (a link to a
// system file would have the records appended to it), or belongs to
// another user. It changes no file's mode: a file the bridge did not
// create keeps its own (wide reports that, for the log to say).
func openAuditFile(path string) (f *os.File, wide bool, err error) {
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, false, fmt.Errorf("%s is a symbolic link: the bridge writes its audit records only to a regular file of its own", path)
		}
		if st, serr := os.Lstat(path); serr == nil && !st.Mode().IsRegular() {
			return nil, false, fmt.Errorf("%s is not a regular file (%s): the bridge writes its audit records only to a regular file of its own", path, st.Mode().Type())
		}
		return nil, false, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, false, err
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file (%s): the bridge writes its audit records only to a regular file of its own", path, st.Mode().Type())
	case sys != nil && sys.Nlink > 1:
		err = fmt.Errorf("%s has %d hard links: the bridge writes its audit records only to a file with no other name", path, sys.Nlink)
	case sys != nil && int(sys.Uid) != os.Geteuid():
		err = fmt.Errorf("%s belongs to user id %d, not to the bridge's (%d): the bridge writes its audit records only to a file of its own", path, sys.Uid, os.Geteuid())
	}
	if err != nil {
		f.Close()
		return nil, false, err
	}
	return f, st.Mode().Perm()&0o077 != 0, nil
}
