package auth

import (
	"io/fs"
	"os"
)

// openPrivate opens a secret file (the receipt key, a token file) for
// reading, refusing a symbolic link or junction (a reparse point).
func openPrivate(path, what string) (*os.File, error) {
	if st, err := os.Lstat(path); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		return nil, symlinkError{what + " " + path + " is a symbolic link: give the file itself"}
	}
	return os.Open(path)
}

// sharedMode reports no file as shared: Windows reports no owner-only mode
// bits (os.Stat makes up 0666 or 0444). Files in the user's profile
// (%APPDATA%, where the bridge keeps its key) inherit an ACL that keeps
// other users out; the bridge does not inspect ACLs.
func sharedMode(st fs.FileInfo) (fs.FileMode, bool) { return st.Mode().Perm(), false }
