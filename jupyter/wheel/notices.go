package wheel

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// StdModule is the name Notices use for Go's standard library and runtime,
// which every binary links (its licence is GOROOT's LICENSE and PATENTS).
const StdModule = "std"

// NoticeDir is the directory, under the wheel's *.dist-info/licenses/ and
// under the sdist's root, that holds the licence files of what the binary
// links: NoticeDir/<module path>/<file>, NoticeDir/std/LICENSE.
const NoticeDir = "third_party"

// ModuleLicence is the SPDX expression of the licence of a Go module the
// binary links (StdModule for Go itself), as a person read it from the
// module's licence files at the version go.sum pins; "" when none is
// recorded. mkwheel refuses to write a wheel whose binary links a module
// not recorded here, so a new dependency cannot ship without its licence
// being read (TestLinkedModulesHaveLicences says which).
func ModuleLicence(module string) string {
	switch module {
	case StdModule,
		"golang.org/x/oauth2", "golang.org/x/sync", "golang.org/x/sys", "golang.org/x/time",
		"google.golang.org/protobuf",
		"github.com/munnerz/goautoneg",
		"github.com/yosida95/uritemplate/v3":
		return "BSD-3-Clause"
	case "github.com/gorilla/websocket":
		return "BSD-2-Clause"
	case "github.com/BurntSushi/toml",
		"github.com/beorn7/perks",
		"github.com/cespare/xxhash/v2",
		"github.com/golang-jwt/jwt/v5",
		"github.com/google/jsonschema-go",
		"github.com/segmentio/asm",
		"github.com/segmentio/encoding":
		return "MIT"
	case "github.com/prometheus/client_golang", "github.com/prometheus/client_model",
		"github.com/prometheus/common", "github.com/prometheus/procfs":
		return "Apache-2.0" // with NOTICE files, which travel with the LICENSE
	case "github.com/modelcontextprotocol/go-sdk":
		// Its LICENSE: in transition from MIT to Apache-2.0; contributions
		// not yet relicensed remain MIT. Both apply.
		return "Apache-2.0 AND MIT"
	}
	return ""
}

// Notice is one licence file of something the binary links, put in the
// wheel (*.dist-info/licenses/<Name>) and in the sdist (<Name>) and named
// by a License-File line.
type Notice struct {
	// Module is the Go module's path, or StdModule.
	Module string
	// File is the licence file's name in the module's root (LICENSE,
	// NOTICE, COPYING, PATENTS, ...).
	File string
	Data []byte
}

// Name is the notice's path: NoticeDir/<module>/<file>.
func (n Notice) Name() string {
	return path.Join(NoticeDir, n.Module, n.File)
}

// IsLicenceFile reports whether a file in a module's root is one of its
// licence files, which travel with every binary that links it.
func IsLicenceFile(name string) bool {
	base := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(name, ".txt"), ".md"))
	for _, p := range []string{"LICENSE", "LICENCE", "COPYING", "NOTICE", "PATENTS"} {
		if base == p || strings.HasPrefix(base, p+"-") || strings.HasPrefix(base, p+".") {
			return true
		}
	}
	return false
}

// LicenseExpression is the SPDX expression of a distribution carrying the
// bridge (License) and the modules notices name: License first, then each
// other licence once, sorted, joined by AND. An error names a module whose
// licence is not recorded (ModuleLicence).
func LicenseExpression(notices []Notice) (string, error) {
	seen := map[string]bool{License: true}
	var ids []string
	for _, n := range notices {
		expr := ModuleLicence(n.Module)
		if expr == "" {
			return "", fmt.Errorf("the binary links %s, whose licence is not recorded: read its licence files and add it to ModuleLicence (jupyter/wheel/notices.go)", n.Module)
		}
		for _, id := range strings.Split(expr, " AND ") {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return strings.Join(append([]string{License}, ids...), " AND "), nil
}

// sortedNotices checks notices (each module's files named once, every
// module's licence recorded) and returns them sorted by Name.
func sortedNotices(notices []Notice) ([]Notice, error) {
	out := slices.Clone(notices)
	slices.SortFunc(out, func(a, b Notice) int { return strings.Compare(a.Name(), b.Name()) })
	for i, n := range out {
		if n.Module == "" || n.File == "" || strings.ContainsAny(n.File, `/\`) || len(n.Data) == 0 {
			return nil, fmt.Errorf("notice %q of module %q: want a module, a file name in its root and the file's text", n.File, n.Module)
		}
		if i > 0 && out[i-1].Name() == n.Name() {
			return nil, fmt.Errorf("notice %s given twice", n.Name())
		}
	}
	if _, err := LicenseExpression(out); err != nil {
		return nil, err
	}
	return out, nil
}
