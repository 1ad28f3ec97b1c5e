package jupyter

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestAtomicFiles: CreateFile never replaces (a second creator gets
// fs.ErrExist and the first file stays), ReplaceFile does; both leave the
// mode asked for and no temporary file behind.
func TestAtomicFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	if err := CreateFile(path, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile(path, []byte("second"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second CreateFile: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "first" {
		t.Fatalf("after a second CreateFile the file holds %q, want the first writer's", b)
	}
	if err := ReplaceFile(path, []byte("third"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "third" {
		t.Fatalf("after ReplaceFile the file holds %q", b)
	}
	checkPrivate(t, path)
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := ReplaceFile(filepath.Join(dir, "missing", "x"), nil, 0o600); err == nil {
		t.Fatal("ReplaceFile into a missing directory succeeded")
	}
}
