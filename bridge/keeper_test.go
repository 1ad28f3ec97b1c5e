package bridge

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKeeperOwnerKilled SIGKILLs a process that owns a transport whose
// server has a grandchild in its group and one in a session of its own:
// none of them may survive.
func TestKeeperOwnerKilled(t *testing.T) {
	pf := filepath.Join(t.TempDir(), "pids")
	cmd := exec.Command(testExe(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), testServerEnv+"=owner", testPidFileEnv+"="+pf)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line
	}()
	var line string
	select {
	case line = <-ready:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-ready
		t.Fatal("the owner did not get ready within 30 s")
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "ready ")))
	if err != nil || pgid <= 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("owner said %q", line)
	}
	b, err := os.ReadFile(pf)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p)
	}
	if len(pids) != 3 {
		t.Fatalf("pid file %q", b)
	}
	for i, what := range []string{"server", "grandchild in the group", "grandchild in its own session"} {
		if e, ok := readProcStat(pids[i]); !ok || e.state == 'Z' {
			t.Fatalf("%s (%d) is not running before the owner is killed", what, pids[i])
		}
	}
	if e, _ := readProcStat(pids[1]); e.pgrp != pgid {
		t.Errorf("grandchild pgrp %d, want %d", e.pgrp, pgid)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitGone(t, "server", pids[0], false)
	waitGone(t, "grandchild in the group", pids[1], false)
	waitGone(t, "grandchild in its own session", pids[2], false)
	// The keeper itself is re-parented to init, which may not reap it.
	waitGone(t, "keeper", pgid, true)
}

func TestKeeperProcStat(t *testing.T) {
	e, ok := readProcStat(os.Getpid())
	if !ok || e.pid != os.Getpid() || e.ppid != os.Getppid() || e.pgrp != syscall.Getpgrp() {
		t.Errorf("readProcStat(self) = %+v, %v", e, ok)
	}
	if _, ok := readProcStat(1 << 30); ok {
		t.Error("readProcStat of a missing pid succeeded")
	}
}
