package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
)

// TestVersionCommand: every spelling prints the version first (the line
// make wheels reads), then the commit and the Go version that built it.
func TestVersionCommand(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version"} {
		t.Run(arg, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if err := run(context.Background(), []string{arg}, nil, &out, &errOut); err != nil {
				t.Fatalf("%v %s", err, errOut.String())
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != 3 || lines[0] != "megane-jupyter-bridge "+version || !strings.HasPrefix(lines[1], "commit: ") ||
				lines[2] != "go: "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH {
				t.Fatalf("version printed %q", out.String())
			}
		})
	}
}
