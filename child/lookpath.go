package child

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// LookPath finds the executable command the way Start will run it: a
// command that names a path (it holds a path separator) is that path,
// relative to dir; any other name is searched in the directories of
// pathList (a PATH value, of the child's environment, not the bridge's).
// Empty and relative PATH entries are ignored: a configured name never runs
// a program from whatever directory happens to be current. On Windows a
// name without an extension also matches the extensions of PATHEXT (.com,
// .exe, .bat, .cmd when unset).
//
// The error is the end of a sentence that names command and what to fix:
// `"uvx" was not found on the server's PATH: install it, or give the entry
// the command's absolute path`.
func LookPath(command, pathList, dir string) (string, error) {
	if command == "" {
		return "", errors.New("no command is configured")
	}
	if hasPathSeparator(command) {
		p := command
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		found, err := executableAt(p)
		if err != nil {
			if p != command {
				return "", fmt.Errorf("%q (%s) %w", command, p, err)
			}
			return "", fmt.Errorf("%q %w", command, err)
		}
		return found, nil
	}
	if pathList == "" {
		return "", fmt.Errorf("%q not found: PATH is not set in the server's environment", command)
	}
	var notExec string
	for _, d := range filepath.SplitList(pathList) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, command)
		found, err := executableAt(p)
		if err == nil {
			return found, nil
		}
		if notExec == "" && !errors.Is(err, os.ErrNotExist) {
			notExec = fmt.Sprintf("; %s %v", p, err)
		}
	}
	if notExec != "" {
		return "", fmt.Errorf("%q was not found on the server's PATH (%s): %w", command, notExec[2:], ErrNotFound)
	}
	return "", fmt.Errorf("%q was not found on the server's PATH: %w", command, ErrNotFound)
}

// ErrNotFound is LookPath's error, wrapped, when no directory of PATH has
// the command. Its text is the fix; the error never lists PATH itself,
// which says nothing a person needs and may be long.
var ErrNotFound = errors.New("install it, or give the entry the command's absolute path")

// LookPathAll is every executable named command in the absolute
// directories of pathList, in PATH order, without repeats.
func LookPathAll(command, pathList string) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range filepath.SplitList(pathList) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		if p, err := executableAt(filepath.Join(d, command)); err == nil && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// IsExecutable reports whether p is a file this system would run.
func IsExecutable(p string) bool {
	_, err := executableAt(p)
	return err == nil
}

// checkFile reports why p is not a regular file, as the end of a sentence
// ("does not exist", "is a directory"), wrapping os.ErrNotExist when it
// does not exist.
func checkFile(p string) (os.FileInfo, error) {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("does not exist: %w", os.ErrNotExist)
		}
		return nil, errors.New(pathErrText(err))
	}
	if fi.IsDir() {
		return nil, errors.New("is a directory")
	}
	return fi, nil
}

// IsPathName reports whether command names a path (it holds a path
// separator: "/" on Linux and macOS, "/", "\" or a drive on Windows) rather
// than a name to search on PATH.
func IsPathName(command string) bool { return hasPathSeparator(command) }
