//go:build unix

package auth

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// openPrivate opens a secret file (the receipt key, a token file) for
// reading, refusing a symbolic link (a link's target may be anyone's file).
func openPrivate(path, what string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, symlinkError{what + " " + path + " is a symbolic link: give the file itself"}
	}
	return f, err
}

// sharedMode reports whether a secret file's mode lets its group or others
// read or change it, and the mode.
func sharedMode(st fs.FileInfo) (fs.FileMode, bool) {
	perm := st.Mode().Perm()
	return perm, perm&0o077 != 0
}
