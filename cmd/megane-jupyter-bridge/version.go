package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// printVersion prints the version (first line, "megane-jupyter-bridge
// VERSION": make wheels reads it), the commit the binary was built from and
// the Go toolchain that built it.
func printVersion(w io.Writer) {
	fmt.Fprintln(w, "megane-jupyter-bridge", version)
	fmt.Fprintln(w, "commit:", buildCommit())
	fmt.Fprintln(w, "go:", runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
}

// commit is the commit the wheels' binaries were built from, stamped by
// mkwheel (-ldflags "-X main.commit=…"; "+dirty" when the checkout had
// changes). mkwheel builds with -buildvcs=false so that a wheel built from
// the sdist, which has no .git but carries this commit, is the same bytes
// as one built from the checkout.
var commit string

// buildCommit is the commit the binary was built from: the one mkwheel
// stamped, else the VCS revision go build stamps in a checkout ("+dirty"
// when files were modified), else the module version go install …@vX
// records, else why none is known.
func buildCommit() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information in the binary)"
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" {
		if dirty {
			rev += "+dirty"
		}
		return rev
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return "module " + bi.Main.Path + "@" + v
	}
	return "unknown (built without VCS information: by go test, with -buildvcs=false, or outside a git checkout)"
}
