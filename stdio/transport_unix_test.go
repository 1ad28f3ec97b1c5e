//go:build unix

package stdio

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// checkServerGroup checks that the server runs under its keeper, which
// leads its process group.
func checkServerGroup(t *testing.T, pid, pgid int) {
	t.Helper()
	if pid == pgid {
		t.Errorf("the server (pid %d) is its own group leader: no keeper", pid)
	}
	if e, ok := child.Lookup(pid); !ok || e.Group != pgid || e.PPID != pgid {
		t.Errorf("server pid %d: %+v, want ppid and pgrp %d (the keeper)", pid, e, pgid)
	}
}

// checkSameGroup checks that process pid is in process group pgid.
func checkSameGroup(t *testing.T, pid, pgid int) {
	t.Helper()
	if e, _ := child.Lookup(pid); e.Group != pgid {
		t.Errorf("pid %d in process group %d, want %d", pid, e.Group, pgid)
	}
}

// stoppedBy reports whether ee says the server was stopped by that step of
// the ladder: "interrupt" is SIGTERM, "kill" is SIGKILL.
func stoppedBy(ee *ExitError, step string) bool {
	want := map[string]string{"interrupt": "SIGTERM", "kill": "SIGKILL"}[step]
	return ee.Stopped && ee.Status == -1 && ee.Signal == want
}

// TestStdioGrandchildren checks that Close leaves nothing of an `sh -c`
// wrapper's children, however they try to survive.
func TestStdioGrandchildren(t *testing.T) {
	for _, tc := range []struct {
		name, spawn string
	}{
		{"background child", `sleep 1000 &`},
		{"child ignoring SIGTERM", `(trap "" TERM; exec sleep 1000) &`},
		{"child in its own session", `setsid sleep 1000 &`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			pf := filepath.Join(t.TempDir(), "pid")
			tr := NewTransport(Options{
				Name:    "wrapped",
				Command: "sh",
				Args:    []string{"-c", tc.spawn + ` echo $! >"$PIDFILE"; exec "$TESTBIN" -test.run='^$'`},
				Env: append(os.Environ(), bridgetest.Mode{}.Env(), "PIDFILE="+pf, "TESTBIN="+testExe(t),
					"PATH=/usr/local/bin:/usr/bin:/bin"),
			})
			cs := connectClient(t, ctx, tr)
			if got := echoText(t, ctx, cs, "x"); got != "x" {
				t.Errorf("echo = %q", got)
			}
			b, err := os.ReadFile(pf)
			if err != nil {
				t.Fatal(err)
			}
			sleepPid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := child.Lookup(sleepPid); !ok {
				t.Fatalf("the grandchild %d is not running", sleepPid)
			}
			server := tr.Pid()
			if err := cs.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			// Close returns after the keeper reaped everything.
			assertGone(t, "grandchild sleep", sleepPid)
			assertGone(t, "server", server)
			assertGone(t, "keeper", tr.Pgid())
		})
	}
}

func TestStdioStartErrors(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "tool.py")
	if err := os.WriteFile(notExec, []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("\x7fELF\x00\x01garbage"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		command string
		path    string // PATH in the server's environment; "-" for none
		dir     string
		want    string
	}{
		{"not on PATH", "uvx-not-installed", "/usr/bin:/bin", "",
			`cannot start lab-tools: "uvx-not-installed" was not found on the server's PATH: install it, or give the entry the command's absolute path`},
		{"no PATH", "uvx", "-", "",
			`cannot start lab-tools: "uvx" not found: PATH is not set in the server's environment`},
		{"not executable", notExec, "/usr/bin", "",
			fmt.Sprintf(`cannot start lab-tools: %q is not executable`, notExec)},
		{"relative path", "./tool.py", "/usr/bin", dir,
			fmt.Sprintf(`cannot start lab-tools: "./tool.py" (%s) is not executable`, notExec)},
		{"missing file", "/opt/nothing/here", "/usr/bin", "",
			`cannot start lab-tools: "/opt/nothing/here" does not exist: file does not exist`},
		{"a directory", dir, "/usr/bin", "",
			fmt.Sprintf(`cannot start lab-tools: %q is a directory`, dir)},
		{"bad working directory", "sh", "/usr/bin:/bin", "/nonexistent/dir",
			`cannot start lab-tools: working directory "/nonexistent/dir": no such file or directory`},
		{"exec format error", garbage, "/usr/bin", "",
			fmt.Sprintf(`cannot start lab-tools: %q: exec format error`, garbage)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{"HOME=/"}
			if tc.path != "-" {
				env = append(env, "PATH="+tc.path)
			}
			tr := NewTransport(Options{Name: "lab-tools", Command: tc.command, Env: env, Dir: tc.dir})
			conn, err := tr.Connect(context.Background())
			if err == nil {
				conn.Close()
				t.Fatal("Connect succeeded")
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
			if pg := tr.Pgid(); pg != 0 {
				assertGone(t, "keeper", pg)
			}
		})
	}
}

func TestStdioKeeperPathNotAKeeper(t *testing.T) {
	opts := serverOptions(t, bridgetest.Mode{})
	opts.KeeperPath = "/bin/true"
	tr := NewTransport(opts)
	conn, err := tr.Connect(context.Background())
	if err == nil {
		conn.Close()
		t.Fatal("Connect succeeded")
	}
	want := `cannot start lab-tools: the keeper "/bin/true" exited before starting the server (lab-tools exited with status 0)`
	if err.Error() != want {
		t.Errorf("error\n got %s\nwant %s", err, want)
	}
	// No keeper is left: TestMain fails the run if one outlives the tests.
}
