package bridge_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
)

// TestAuditFileRefusesWhatIsNotItsOwn: the audit path is opened without
// following a link, and a file that is not regular, has another hard link
// or belongs to another user is refused (logged once; the calls are
// answered as ever), never appended to and never chmodded. Before, a link
// at the audit path had its target appended to and made 0600 (the bridge
// ran as root).
func TestAuditFileRefusesWhatIsNotItsOwn(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, dir, path string) (victim string)
		why  string
	}{
		{"symbolic link", func(t *testing.T, dir, path string) string {
			victim := filepath.Join(dir, "victim")
			mustWrite(t, victim, "precious\n", 0o644)
			must(t, os.Symlink(victim, path))
			return victim
		}, "is a symbolic link"},
		{"hard link", func(t *testing.T, dir, path string) string {
			victim := filepath.Join(dir, "victim")
			mustWrite(t, victim, "precious\n", 0o644)
			must(t, os.Link(victim, path))
			return victim
		}, "has 2 hard links"},
		{"fifo", func(t *testing.T, dir, path string) string {
			must(t, syscall.Mkfifo(path, 0o600))
			return ""
		}, "is not a regular file"},
		{"another user's file", func(t *testing.T, dir, path string) string {
			if os.Geteuid() != 0 {
				if os.Getenv("CI") == "true" {
					t.Fatal("CI runs as root, and this case needs root to give the file away")
				}
				t.Skip("giving a file to another user needs root")
			}
			mustWrite(t, path, "theirs\n", 0o644)
			must(t, os.Chown(path, 4242, 4242))
			return path
		}, "belongs to user id 4242"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "audit.jsonl")
			victim := tc.make(t, dir, path)
			h := echoCalls(t, bridge.Options{AuditFile: path}, 2)
			h.b.Close()
			logs := h.logBuf.String()
			if n := strings.Count(logs, "cannot write the audit file"); n != 1 || !strings.Contains(logs, tc.why) {
				t.Errorf("the refusal was logged %d times (want once, saying %q):\n%s", n, tc.why, logs)
			}
			t.Logf("abuse: a %s at the audit path (the bridge runs as root) | refused, logged once, never written or chmodded; calls go on | refused: %s", tc.name, tc.why)
			if victim != "" {
				data, _ := os.ReadFile(victim)
				st, _ := os.Stat(victim)
				if string(data) != "precious\n" && string(data) != "theirs\n" {
					t.Errorf("the file behind the audit path was written: %q", data)
				}
				if st.Mode().Perm() != 0o644 {
					t.Errorf("the file behind the audit path was chmodded to %v", st.Mode().Perm())
				}
			}
		})
	}
	t.Run("own file readable by others", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		mustWrite(t, path, "", 0o644)
		h := echoCalls(t, bridge.Options{AuditFile: path}, 1)
		h.b.Close()
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
			t.Errorf("the bridge changed the mode of a file it did not create to %v", st.Mode().Perm())
		}
		if len(auditLines(t, path)) == 0 || !strings.Contains(h.logBuf.String(), "the audit file may be read by others") {
			t.Errorf("the records were not written, or the log does not warn of the file's mode:\n%s", h.logBuf.String())
		}
	})
}

// auditFsizeEnv makes the test binary run TestAuditLinesStayWhole's calls
// under a file size limit (its value, in bytes), as on a full disk.
const auditFsizeEnv = "MEGANE_TEST_AUDIT_FSIZE"

// TestAuditLinesStayWhole: when the disk fills in the middle of a record
// (here a file size limit: the write is cut short, then fails), the part
// written is taken back, so the file holds whole records only; the failure
// is logged once and every call is answered. Before, a full disk left one
// torn line.
func TestAuditLinesStayWhole(t *testing.T) {
	if os.Getenv(auditFsizeEnv) != "" {
		// The child: a file size limit for this process only.
		signal.Ignore(syscall.SIGXFSZ)
		lim := &syscall.Rlimit{Cur: 1500, Max: 1500}
		must(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, lim))
		h := echoCalls(t, bridge.Options{AuditFile: os.Getenv("MEGANE_TEST_AUDIT_PATH")}, 12)
		h.b.Close()
		if n := strings.Count(h.logBuf.String(), "cannot write the audit file"); n != 1 {
			t.Fatalf("the full file was logged %d times, want once:\n%s", n, h.logBuf.String())
		}
		return
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	// The child runs from a link of its own: the test binary's check for
	// processes left behind kills any other process of the same path.
	exe, err := os.Executable()
	must(t, err)
	self := filepath.Join(t.TempDir(), "bridge.test")
	must(t, os.Link(exe, self))
	cmd := exec.Command(self, "-test.run=^TestAuditLinesStayWhole$", "-test.count=1")
	cmd.Env = append(os.Environ(), auditFsizeEnv+"=1", "MEGANE_TEST_AUDIT_PATH="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the calls under a file size limit: %v\n%s", err, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 || !bytes.HasSuffix(data, []byte("\n")) {
		t.Fatalf("the audit file ends inside a record (%d bytes):\n%s", len(data), data)
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	for _, line := range lines {
		if !json.Valid(line) {
			t.Fatalf("a torn record: %q", line)
		}
	}
	t.Logf("abuse: the disk fills in the middle of an audit record (a 1500-byte file size limit) | the part written is taken back: whole lines only; calls answered | %d whole records, no torn line", len(lines))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	must(t, os.WriteFile(path, []byte(data), mode))
	must(t, os.Chmod(path, mode))
}
