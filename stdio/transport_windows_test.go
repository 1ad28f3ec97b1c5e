package stdio

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// checkServerGroup checks that the server leads its own group: on Windows
// there is no keeper, the job holds it.
func checkServerGroup(t *testing.T, pid, group int) {
	t.Helper()
	if pid != group {
		t.Errorf("server pid %d, group %d: want the same", pid, group)
	}
	if _, ok := child.Lookup(pid); !ok {
		t.Errorf("server pid %d is not in the process table", pid)
	}
}

// checkSameGroup does nothing: on Windows the job, not a group, holds a
// server's descendants.
func checkSameGroup(t *testing.T, pid, group int) {}

// stoppedBy reports whether ee says the server was stopped by that step of
// the ladder. A console-less CTRL_BREAK may not reach the server, so the
// interrupt step may end as the kill step does: TerminateJobObject with
// status 1.
func stoppedBy(ee *ExitError, step string) bool {
	return ee.Stopped && ee.Signal == "" && (ee.Status == 1 || (step == "interrupt" && ee.Status != 0))
}

func TestStdioStartErrorsWindows(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, command, path, want string
	}{
		{"not on PATH", "uvx-not-installed", `C:\windows\system32`,
			`cannot start lab-tools: "uvx-not-installed" was not found on the server's PATH: install it, or give the entry the command's absolute path`},
		{"no PATH", "uvx", "", `cannot start lab-tools: "uvx" not found: PATH is not set in the server's environment`},
		{"Path, as Windows spells it", "uvx-not-installed", "Path=" + `C:\windows`,
			`cannot start lab-tools: "uvx-not-installed" was not found on the server's PATH: install it, or give the entry the command's absolute path`},
		{"a directory", dir, "", fmt.Sprintf(`cannot start lab-tools: %q is a directory`, dir)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{}
			if name, value, ok := strings.Cut(tc.path, "="); ok && name == "Path" {
				env = append(env, "Path="+value)
			} else if tc.path != "" {
				env = append(env, "PATH="+tc.path)
			}
			tr := NewTransport(Options{Name: "lab-tools", Command: tc.command, Env: env})
			conn, err := tr.Connect(context.Background())
			if err == nil {
				conn.Close()
				t.Fatal("Connect succeeded")
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}
