//go:build unix

package bridgetest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestGrandchildAndSIGTERM(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	c := startChild(t, Mode{SpawnGrandchild: true, GrandchildPidFile: pidFile, IgnoreSIGTERM: true, LingerAfterEOF: true})
	cs := connectSDK(t, c.stdout, c.stdin, nil)
	defer cs.Close()
	pid := readPid(t, pidFile)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("grandchild %d not running: %v", pid, err)
	}
	if pgid, _ := syscall.Getpgid(pid); pgid != c.cmd.Process.Pid && pgid != syscall.Getpgrp() {
		t.Errorf("grandchild in process group %d", pgid)
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cs.Ping(context.Background(), nil); err != nil {
		t.Fatalf("the server did not survive SIGTERM: %v", err)
	}
	c.stdin.Close()
	select {
	case <-c.done:
		t.Fatal("the server exited after stdin closed despite LingerAfterEOF")
	case <-time.After(200 * time.Millisecond):
	}
	c.cmd.Process.Kill()
	if code := exitCode(c.wait(t)); code != -1 {
		t.Errorf("exit %v, want killed", c.err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("the grandchild died with its parent (it must be left for the group kill): %v", err)
	}
}

// TestDetachedGrandchild: Mode.SpawnDetached's grandchild runs in a session
// of its own, out of the server's process group, and outlives the server.
func TestDetachedGrandchild(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	c := startChild(t, Mode{SpawnDetached: true, DetachedPidFile: pidFile})
	cs := connectSDK(t, c.stdout, c.stdin, nil)
	pid := readPid(t, pidFile)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if sid, err := unix.Getsid(pid); err != nil || sid != pid {
		t.Errorf("grandchild %d in session %d (%v), want a session of its own", pid, sid, err)
	}
	cs.Close()
	c.wait(t)
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("the detached grandchild died with the server: %v", err)
	}
}

// readPid reads a pid file the server wrote.
func readPid(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
