// Package childtest is the test kit for packages whose tests start
// processes: a TestMain that fails the run when a process the tests
// started outlives them, and waits on process state. It is imported by
// tests only; it never starts a process itself.
package childtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/child"
	"go.uber.org/goleak"
)

// RunEnv carries a value unique to one run of a test binary. Every process
// the tests start inherits it (keepers, whose environment the bridge sets,
// are known by their executable, the test binary), so that VerifyTestMain
// can find any process that outlived the tests.
const RunEnv = "MEGANE_TEST_RUN"

// VerifyTestMain runs m and exits: it fails the run if a goroutine leaked
// (goleak) or, on Linux, if a process the tests started is still there a
// moment after they ended (each is named with its pid and command line,
// and killed). Call it last in TestMain, after the re-exec checks that turn
// the test binary into a keeper or a test server.
func VerifyTestMain(m interface{ Run() int }) {
	// A race-enabled binary sleeps 1 s when it exits; the servers and
	// keepers these tests start are this binary, and stop steps are timed.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	var b [8]byte
	rand.Read(b[:])
	run := hex.EncodeToString(b[:])
	os.Setenv(RunEnv, run)
	goleak.VerifyTestMain(runThenCheckProcesses{m: m, run: run})
}

type runThenCheckProcesses struct {
	m   interface{ Run() int }
	run string
}

func (r runThenCheckProcesses) Run() int {
	code := r.m.Run()
	exe, _ := os.Executable()
	var left []int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left = processesOfRun(r.run, exe)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) == 0 {
		return code
	}
	fmt.Fprintf(os.Stderr, "FAIL: %d processes started by the tests outlived them (now killed):\n", len(left))
	for _, pid := range left {
		fmt.Fprintf(os.Stderr, "  pid %d: %s\n", pid, commandLine(pid))
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
		}
	}
	return max(code, 1)
}

// WaitGone waits up to 10 s for process pid to be gone (or a zombie, if
// zombieOK), and fails t naming what it was otherwise.
func WaitGone(t testing.TB, what string, pid int, zombieOK bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		e, ok := child.Lookup(pid)
		if !ok || (zombieOK && e.State == 'Z') {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s (pid %d) is still there (state %c)", what, pid, e.State)
			return
		}
	}
}

// Running reports whether process pid exists and is not a zombie.
func Running(pid int) bool {
	e, ok := child.Lookup(pid)
	return ok && e.State != 'Z'
}
