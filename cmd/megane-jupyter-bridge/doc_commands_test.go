package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runnableMark is the HTML comment (invisible on GitHub) that marks the
// next fenced shell block of a document as commands a newcomer runs as
// written after make build; TestDocumentedCommands runs each of its lines.
const runnableMark = "<!-- runnable after make build -->"

// runnableBlocks returns the command lines of doc's marked blocks.
func runnableBlocks(t *testing.T, doc string) []string {
	t.Helper()
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	marked, in := false, false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case line == runnableMark:
			marked = true
		case marked && !in && strings.HasPrefix(line, "```"):
			if line != "```sh" {
				t.Fatalf("%s: a runnable block must be ```sh, not %s", doc, line)
			}
			in = true
		case in && line == "```":
			in, marked = false, false
		case in:
			cmd, _, _ := strings.Cut(line, "  #") // the comment after the command
			if cmd = strings.TrimSpace(cmd); cmd != "" {
				lines = append(lines, cmd)
			}
		case marked && strings.TrimSpace(line) != "":
			t.Fatalf("%s: %s is not followed by a ```sh block", doc, runnableMark)
		}
	}
	return lines
}

// TestDocumentedCommands: every command of the README's blocks marked
// runnable works as written on a newcomer's machine after make build:
// from the repository's root (bin/ and etc/ as make build and the clone
// leave them), with a fresh HOME and nothing on PATH but the system's, it
// exits 0. A document that drifts from the binary fails here.
func TestDocumentedCommands(t *testing.T) {
	root := t.TempDir()
	// bin/megane-jupyter-bridge as make build leaves it: this test binary,
	// which runs as the bridge when asProgramEnv is set.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "bin"), 0o755))
	self, err := os.Executable()
	must(err)
	must(os.Symlink(self, filepath.Join(root, "bin", "megane-jupyter-bridge")))
	etc, err := filepath.Abs(filepath.Join("..", "..", "etc"))
	must(err)
	must(os.Symlink(etc, filepath.Join(root, "etc")))
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", asProgramEnv + "=1"}

	var cmds []string
	for _, doc := range []string{filepath.Join("..", "..", "README.md"), "TROUBLESHOOTING.md"} {
		cmds = append(cmds, runnableBlocks(t, doc)...)
	}
	if len(cmds) < 3 {
		t.Fatalf("found %d runnable commands, want the README's three (servers, doctor, check --standalone): is %q still there?", len(cmds), runnableMark)
	}
	for _, line := range cmds {
		t.Run(line, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "sh", "-c", line)
			cmd.Dir, cmd.Env = root, env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s, run as written after make build with a fresh HOME: %v\n%s", line, err, out)
			}
		})
	}
}

// TestFirstBuildOffline: make build (what make run runs first) on a
// machine that cannot fetch the pinned Go (here: a pin that does not
// exist, with GOPROXY=off) builds with the local Go, at or above go.mod's
// go line, and says so in one line naming what that costs; the binary
// runs. Before, it stopped at "toolchain not available" with nothing
// saying what to do.
func TestFirstBuildOffline(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	bin := filepath.Join(t.TempDir(), "megane-jupyter-bridge")
	cmd := exec.Command("make", "-s", "build", "BIN="+bin, "GOTOOLCHAIN=go1.99.0")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make build without the pinned Go: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "make: the pinned Go (go1.99.0) cannot be fetched (no network?): building with the local go") ||
		!strings.Contains(lines[0], "known vulnerabilities") {
		t.Fatalf("make build said %q; want one line naming the local Go and what it costs", out)
	}
	if v, err := exec.Command(bin, "version").Output(); err != nil || !strings.HasPrefix(string(v), "megane-jupyter-bridge ") {
		t.Fatalf("%s version: %v %s", bin, err, v)
	}
}
