package child_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// winePackages are the packages whose Windows test binaries run under wine:
// supervision (child), the stdio transport (stdio) and the relay (bridge).
// skip names the tests that cannot run there, with the reason.
var winePackages = []struct {
	name, dir string
	run       string // a -test.run pattern, or "" for all
	skip      string // a -test.skip pattern, or ""
	why       string
}{
	{name: "child", dir: "."},
	{name: "stdio", dir: "../stdio"},
	{name: "bridge", dir: "../bridge",
		skip: "^(TestFaultHangInitGiveUp|TestFaultMalformedJSONRPC|TestFaultSlowReader|TestFaultStderrFlood|TestFaultStubbornServer|TestFaultsLeaveNothing|TestRemovedServer|TestEverything|TestHTTPServerRestartLosesSession|TestReferenceServersByteExact|TestReferenceFixturesPassThrough|TestBusyAfterCancel|TestBusyAfterCancelNotOtherCalls|TestRestartBusyAfterCancel|TestSessionEnds|TestLivenessWrapper|TestResumeAfterMinutes|TestAwayFloodBounded)$",
		why: "the TestFault* tests and TestRemovedServer find a server's processes by the marker in their environment in /proc, which Windows does not offer " +
			"(TestOwnerKilled and TestStdioDescendantsStopped in stdio check the job's kill on Windows); TestEverything, TestHTTPServerRestartLosesSession and TestReferenceServersByteExact need Node.js and npm's servers, " +
			"TestReferenceFixturesPassThrough and the TestBusyAfterCancel and TestRestartBusyAfterCancel tests the shared/ fixtures, neither of which is in the chroot (the bytes they check do not depend on the OS); " +
			"TestSessionEnds and TestLivenessWrapper wrap the server in /bin/sh (a wrapper that keeps its pipes) and name the signal that killed it, which Windows has neither of (their HTTP rows do not depend on the OS); " +
			"TestResumeAfterMinutes waits 4 minutes, half the binary's time under wine, and TestAwayFloodBounded measures the Linux runtime's memory under load: page sessions do not depend on the OS, and the other page-session tests run here"},
	// Jupyter's directories per OS; the rest of jupyter's tests run a real
	// Jupyter server, which is not in the chroot's wine.
	{name: "jupyter", dir: "../jupyter", run: "^TestDataDir$"},
}

// TestWindowsUnderWine cross-builds the Windows test binaries of the
// supervision, stdio and relay packages and runs them under wine (Debian
// 13's wine64, in the trixie chroot): real Windows child processes, put in
// a Job Object and killed with it. Under CI=true a missing chroot or wine
// fails the test.
func TestWindowsUnderWine(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the Windows test binaries are not built")
	}
	root := jupytertest.Trixie(t)
	if _, err := os.Stat(filepath.Join(root, "usr/lib/wine/wine64")); err != nil {
		jupytertest.Need(t, "wine64 in the trixie chroot (.ci/trixie-chroot.sh)", err)
	}
	work, err := os.MkdirTemp(filepath.Join(root, "tmp"), "megane-wine-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	inner := strings.TrimPrefix(work, root) // the same directory, seen from inside
	for _, pkg := range winePackages {
		t.Run(pkg.name, func(t *testing.T) {
			dir := filepath.Join(work, pkg.name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			exe := pkg.name + ".test.exe"
			build := exec.Command("go", "test", "-c", "-o", filepath.Join(dir, exe), pkg.dir)
			build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("building the Windows test binary of %s: %v\n%s", pkg.name, err, out)
			}
			// The tests read testdata/ and the package's documents from
			// their working directory, as go test runs them.
			copyTestFiles(t, pkg.dir, dir)
			args := []string{"-test.v", "-test.timeout=8m"}
			if pkg.run != "" {
				args = append(args, "-test.run="+pkg.run)
			}
			if pkg.skip != "" {
				args = append(args, "-test.skip="+pkg.skip)
				t.Logf("not run under wine: %s: %s", pkg.skip, pkg.why)
			}
			// A mount namespace of its own with /proc (wine needs it), a
			// clean environment, and wineserver stopped before the end so
			// that nothing outlives the test.
			script := `mount -t proc proc "$0/proc" && exec chroot "$0" /bin/sh -c 'cd "$1" && shift && /usr/lib/wine/wine64 "$@"; s=$?; /usr/lib/wine/wineserver -k 2>/dev/null; /usr/lib/wine/wineserver -w 2>/dev/null; exit $s' sh "$@"`
			cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "/bin/sh", "-c", script,
				root, filepath.Join(inner, pkg.name), "./" + exe}, args...)...)
			cmd.Env = []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "HOME=" + inner, "WINEPREFIX=" + filepath.Join(inner, "prefix"),
				"WINEDEBUG=-all", "LANG=C.UTF-8", "CI=true"} // a test that would skip fails
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			err := cmd.Run()
			passed := strings.Count(out.String(), "--- PASS")
			t.Logf("%s under wine: %d tests and subtests passed in %s", pkg.name, passed, time.Since(start).Round(time.Second))
			if err != nil || !strings.Contains(out.String(), "\nPASS") {
				t.Errorf("%s's Windows tests failed under wine (%v):\n%s", pkg.name, err, failures(out.String()))
			}
		})
	}
}

// copyTestFiles copies src/testdata and src/*.md into dst.
func copyTestFiles(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(filepath.Join(dst, "testdata"), os.DirFS(filepath.Join(src, "testdata"))); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob(filepath.Join(src, "*.md"))
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(d)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// failures is the lines of a verbose test run worth reading: failures and
// what the failing tests logged, or its end when nothing says FAIL.
func failures(out string) string {
	var keep []string
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		// A timeout's panic names the running tests on lines that start
		// with a tab, before the goroutine dump.
		running := i > 0 && strings.HasPrefix(lines[i-1], "running tests:") || strings.HasPrefix(l, "\t") && len(keep) > 0 && strings.HasPrefix(keep[len(keep)-1], "\t")
		if strings.Contains(l, "FAIL") || strings.Contains(l, "panic") || strings.HasPrefix(l, "running tests:") || running ||
			(strings.HasPrefix(l, "    ") && i > 0 && !strings.HasPrefix(strings.TrimSpace(l), "--- PASS")) {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		keep = lines[max(0, len(lines)-40):]
	}
	return strings.Join(keep, "\n")
}
