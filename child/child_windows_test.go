package child_test

import (
	"os"
	"path/filepath"
	"testing"
)

// writeExecutable writes name.exe: LookPath finds it by name through
// PATHEXT.
func writeExecutable(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name+".exe")
	if err := os.WriteFile(p, []byte("MZ"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
