package bridgetest

import (
	"path/filepath"
	"runtime"
)

// FixtureDir is where the megane-reference fixtures (tools-list.json,
// call-polymer_chain.json) are: the shared/ folder that lies beside the
// repository checkout, on developers' machines and in CI alike.
func FixtureDir() string {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	return filepath.Join(root, "..", "shared", "fixtures", "megane-reference")
}
