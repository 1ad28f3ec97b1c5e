package stdio

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/megane-labs/megane-jupyter-bridge/child/childtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as the processes the stdio tests run: TestMain
// turns it into a keeper (child.RunKeeperIfRequested), into a bridgetest
// tool server (bridgetest.ServeFromEnv) or into the owner of a transport
// (ownerEnv) before any test runs.

// ownerEnv names a directory: the test binary becomes a process that owns a
// transport running a bridgetest server with grandchildren, and writes the
// pid files there (see owner).
const ownerEnv = "MEGANE_TEST_OWNER"

func TestMain(m *testing.M) {
	child.RunKeeperIfRequested()
	if bridgetest.ServeFromEnv() {
		os.Exit(0)
	}
	if dir := os.Getenv(ownerEnv); dir != "" {
		os.Exit(owner(dir))
	}
	childtest.VerifyTestMain(m)
}

// familyMode is a server that writes its pid, and starts one sleeper in its
// process group and one that leaves it, each writing its pid in dir.
func familyMode(dir string) bridgetest.Mode {
	return bridgetest.Mode{
		PidFile:         filepath.Join(dir, "server"),
		SpawnGrandchild: true, GrandchildPidFile: filepath.Join(dir, "in-group"),
		SpawnDetached: true, DetachedPidFile: filepath.Join(dir, "detached"),
	}
}

// familyWhat names the processes of familyMode, in the order of familyPids.
var familyWhat = []string{"server", "grandchild in the group", "grandchild that left it"}

// familyPids reads the pids familyMode's server wrote in dir.
func familyPids(dir string) ([]int, error) {
	var pids []int
	for _, name := range []string{"server", "in-group", "detached"} {
		pid, err := readPid(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// readPid reads a pid file of a bridgetest server.
func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var pid int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &pid); err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s holds %q", path, b)
	}
	return pid, nil
}

// owner owns a transport running familyMode's server, prints "ready <pgid>"
// once the server has answered initialize (its pid files are written
// before), and waits to be killed.
func owner(dir string) int {
	exe, err := os.Executable()
	if err != nil {
		return 1
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, ownerEnv+"=") {
			env = append(env, kv)
		}
	}
	tr := NewTransport(Options{
		Name: "family", Command: exe, Args: []string{"-test.run=^$"},
		Env: append(env, familyMode(dir).Env()),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "owner", Version: "1"}, nil)
	if _, err := client.Connect(ctx, tr, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("ready %d\n", tr.Pgid())
	for {
		time.Sleep(time.Hour)
	}
}
