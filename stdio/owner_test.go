package stdio

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/child/childtest"
)

// TestOwnerKilled kills (SIGKILL; TerminateProcess on Windows) a process
// that owns a transport whose server has a grandchild in its group and one
// that left it: none of them may survive.
func TestOwnerKilled(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(testExe(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), ownerEnv+"="+dir)
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
	pids, err := familyPids(dir)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal(err)
	}
	for i, what := range familyWhat {
		if !childtest.Running(pids[i]) {
			t.Fatalf("%s (%d) is not running before the owner is killed", what, pids[i])
		}
	}
	checkSameGroup(t, pids[1], pgid)

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for i, what := range familyWhat {
		childtest.WaitGone(t, what, pids[i], false)
	}
	// The keeper itself is re-parented to init, which may not reap it.
	childtest.WaitGone(t, "keeper", pgid, true)
}
