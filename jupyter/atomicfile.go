package jupyter

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The files the bridge writes into Jupyter's directories (the proxy
// registration in jupyter_server_config.json, the receipt key and the
// standalone token in the data directory) are written one way, here: to a
// new file beside the target, with its final mode before any byte is
// written, synced, and only then put in the target's place, so a reader (or
// a bridge starting concurrently) never sees part of one.

// ReplaceFile writes data to path, replacing what was there (a rename).
// The file has mode perm; the directory must exist.
func ReplaceFile(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeBeside(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// CreateFile writes data to path only if path does not exist yet (a hard
// link, which fails rather than replaces): when another writer came first,
// the error wraps fs.ErrExist and its file is left as it is, so two
// creators agree on one file. The file has mode perm; the directory must
// exist.
func CreateFile(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeBeside(path, data, perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}

// writeBeside writes data to a new file in path's directory with mode perm
// (set before the data is written), synced and closed, and returns its name.
func writeBeside(path string, data []byte, perm fs.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	name := f.Name()
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return name, nil
}
