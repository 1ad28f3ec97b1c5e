package child_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/child"
)

func TestLookup(t *testing.T) {
	e, ok := child.Lookup(os.Getpid())
	if !ok || e.PID != os.Getpid() || e.PPID != os.Getppid() || e.State == 'Z' {
		t.Errorf("Lookup(self) = %+v, %v", e, ok)
	}
	if _, ok := child.Lookup(1 << 30); ok {
		t.Error("Lookup of a missing pid succeeded")
	}
	found := false
	for _, p := range child.Processes() {
		found = found || p.PID == os.Getpid()
	}
	if !found {
		t.Error("Processes() does not list this process")
	}
}

func TestExitString(t *testing.T) {
	for _, tc := range []struct {
		e    child.Exit
		want string
	}{
		{child.Exit{Code: 3}, "exited with status 3"},
		{child.Exit{Code: -1, Signal: "SIGKILL"}, "was killed by signal SIGKILL"},
	} {
		if got := tc.e.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}

// TestLookPathIgnoresRelativeEntries: a configured name never runs a
// program from the current directory, whatever PATH says.
func TestLookPathIgnoresRelativeEntries(t *testing.T) {
	dir := t.TempDir()
	name := "megane-lookpath-test"
	exe := writeExecutable(t, dir, name)
	t.Chdir(dir)
	sep := string(os.PathListSeparator)
	for _, tc := range []struct {
		name, path string
		want       string // "" for not found
	}{
		{"absolute entry", dir, exe},
		{"empty entry", sep + sep, ""},
		{"dot entry", ".", ""},
		{"relative entry", filepath.Base(dir), ""},
		{"absolute after empty", sep + dir, exe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := child.LookPath(name, tc.path, dir)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "was not found on the server's PATH") {
					t.Errorf("LookPath = %q, %v; want not found", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("LookPath = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if got := child.LookPathAll(name, dir+sep+"."+sep+dir); len(got) != 1 || got[0] != exe {
		t.Errorf("LookPathAll = %q", got)
	}
}

func TestEnviron(t *testing.T) {
	base := []string{"PATH=/bin", "JUPYTER_TOKEN=secret", "CLOUD_KEY=k", "HOME=/h", "MEGANE_BRIDGE_KEEPER=1", "LANG=C"}
	got := child.Environ(base, []string{"JUPYTER_TOKEN", "CLOUD_*"}, map[string]string{"LANG": "C.UTF-8", "A": "1"})
	want := []string{"PATH=/bin", "HOME=/h", "A=1", "LANG=C.UTF-8"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Environ = %q, want %q", got, want)
	}
}

// TestStrips: a "*" anywhere in an entry stands for any run of characters,
// so one entry can name a family of credentials (JUPYTER*TOKEN*) and an
// exact name names only itself.
func TestStrips(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"JUPYTER_TOKEN", "JUPYTER_TOKEN", true},
		{"JUPYTER_TOKEN", "JUPYTER_TOKENS", false},
		{"JUPYTER_TOKEN", "X_JUPYTER_TOKEN", false},
		{"CLOUD_*", "CLOUD_KEY", true},
		{"CLOUD_*", "CLOUD_", true},
		{"CLOUD_*", "CLOUD", false},
		{"JUPYTER*TOKEN*", "JUPYTERHUB_OAUTH_ACCESS_TOKEN", true},
		{"JUPYTER*TOKEN*", "JUPYTER_SERVER_TOKEN", true},
		{"JUPYTER*TOKEN*", "JUPYTER_TOKEN_FILE", true},
		{"JUPYTER*TOKEN*", "JUPYTERHUB_USER", false},
		{"JUPYTER*TOKEN*", "MY_JUPYTER_TOKEN", false},
		{"*_SECRET", "A_SECRET", true},
		{"*_SECRET", "A_SECRET_NOT", false},
		{"A*B*C", "AxxBxxBxxC", true},
		{"A*B*C", "AxxBxxBxxCx", false},
		{"A**B", "AB", true},
		{"", "", true},
		{"", "A", false},
	} {
		if got := child.Strips([]string{tc.pattern}, tc.name); got != tc.want {
			t.Errorf("Strips([%q], %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
	// A long name against many stars stays fast (no exponential backtracking).
	long := strings.Repeat("A", 10000)
	if child.Strips([]string{strings.Repeat("*A", 50) + "B"}, long) {
		t.Error("a pattern ending in B matched a name without B")
	}
}

func TestGetenv(t *testing.T) {
	env := []string{"PATH=/a", "HOME=/h", "PATH=/b", "EMPTY="}
	for key, want := range map[string]string{"PATH": "/b", "HOME": "/h", "EMPTY": "", "MISSING": ""} {
		if got := child.Getenv(env, key); got != want {
			t.Errorf("Getenv(%s) = %q, want %q", key, got, want)
		}
	}
	// Windows compares names without case: its PATH is usually "Path".
	got := child.Getenv([]string{"Path=/w"}, "PATH")
	if want := map[bool]string{true: "/w", false: ""}[child.EnvKey("Path") == "PATH"]; got != want {
		t.Errorf(`Getenv(["Path=/w"], "PATH") = %q, want %q on this system`, got, want)
	}
}
