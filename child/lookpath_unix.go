//go:build unix

package child

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"
)

func hasPathSeparator(command string) bool { return strings.Contains(command, "/") }

// executableAt returns p if it is a file the caller may execute.
func executableAt(p string) (string, error) {
	fi, err := checkFile(p)
	if err != nil {
		return "", err
	}
	if fi.Mode()&0o111 == 0 || unix.Access(p, unix.X_OK) != nil {
		return "", errors.New("is not executable")
	}
	return p, nil
}
