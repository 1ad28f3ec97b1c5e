package child

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func hasPathSeparator(command string) bool {
	return strings.ContainsAny(command, `/\:`)
}

// executableAt returns p, or p with one of the PATHEXT extensions when p
// has none, if that is a file Windows would run.
func executableAt(p string) (string, error) {
	exts := pathExt()
	if ext := strings.ToLower(filepath.Ext(p)); ext != "" {
		if _, err := checkFile(p); err != nil {
			return "", err
		}
		for _, e := range exts {
			if ext == e {
				return p, nil
			}
		}
		return "", fmt.Errorf("is not a program (its extension is not one of %s)", strings.Join(exts, " "))
	}
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return "", errors.New("is a directory")
	}
	var first error
	for _, e := range exts {
		if _, err := checkFile(p + e); err == nil {
			return p + e, nil
		} else if first == nil && !errors.Is(err, os.ErrNotExist) {
			first = err
		}
	}
	if first != nil {
		return "", first
	}
	return "", fmt.Errorf("does not exist (nor with %s): %w", strings.Join(exts, ", "), os.ErrNotExist)
}

// pathExt is the lowercased extensions of PATHEXT, or the usual ones.
func pathExt() []string {
	var out []string
	for _, e := range strings.Split(strings.ToLower(os.Getenv("PATHEXT")), ";") {
		if strings.HasPrefix(e, ".") && len(e) > 1 {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		out = []string{".com", ".exe", ".bat", ".cmd"}
	}
	return out
}
