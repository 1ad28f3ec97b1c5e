package child

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A cgroup is a tool server's own cgroup v2, where the system delegates a
// subtree to the bridge (the bridge may create cgroups under its own, and
// the kernel has cgroup.kill: Linux 5.14 or later). The keeper is born in it
// (clone3's CLONE_INTO_CGROUP), so the server and everything it starts are
// in it whatever they do to their process group, session or parent, and
// cgroup.kill ends all of them at once. A process can leave only by writing
// its pid into another cgroup's cgroup.procs, which a process of the same
// user can do inside a delegated subtree: the cgroup holds what does not
// try, the keeper and the Reaper what does not know how.
type cgroup struct {
	dir string
	fd  int // open on dir until the keeper has started; -1 after
}

// cgroupPrefix names the cgroups the bridge makes: megane-<bridge pid>-<random>.
const cgroupPrefix = "megane-"

// CgroupsEnv, set to "off" in the bridge's environment, keeps tool servers
// out of cgroups of their own (where another manager owns the subtree and
// must not find directories it did not make).
const CgroupsEnv = "MEGANE_BRIDGE_CGROUPS"

// cgroupEmptyBound bounds how long remove waits for a killed cgroup to
// empty (processes in uninterruptible sleep) before it leaves the directory
// to the next bridge's sweep.
const cgroupEmptyBound = 5 * time.Second

// newCgroup makes a cgroup for one server under the bridge's own, or
// returns nil where the system gives none (no cgroup v2, not delegated to
// this user, no cgroup.kill). It first removes the cgroups of bridges that
// are gone, killing what was left in them.
func newCgroup() *cgroup {
	if os.Getenv(CgroupsEnv) == "off" {
		return nil
	}
	base := ownCgroupDir()
	if base == "" {
		return nil
	}
	sweepStaleCgroups(base)
	dir, err := os.MkdirTemp(base, cgroupPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil
	}
	c := &cgroup{dir: dir, fd: -1}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		_ = unix.Rmdir(dir)
		return nil
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = unix.Rmdir(dir)
		return nil
	}
	c.fd = fd
	return c
}

// apply makes a process started with a be born in c.
func (c *cgroup) apply(a *syscall.SysProcAttr) {
	a.UseCgroupFD = true
	a.CgroupFD = c.fd
}

// started closes the descriptor apply used.
func (c *cgroup) started() {
	if c.fd >= 0 {
		_ = unix.Close(c.fd)
		c.fd = -1
	}
}

// kill SIGKILLs every process in c.
func (c *cgroup) kill() {
	_ = os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0)
}

// members are the pids in c.
func (c *cgroup) members() []int {
	b, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// remove kills what is left in c, reaps those that came to this process
// (the Reaper makes it their subreaper; except keeper, whose owner reaps
// it), waits for c to empty and removes it.
func (c *cgroup) remove(keeper int) {
	c.started()
	left := c.members()
	c.kill()
	self := os.Getpid()
	deadline := time.Now().Add(cgroupEmptyBound)
	for populated(c.dir) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for _, pid := range left {
		if p, ok := Lookup(pid); ok && pid != keeper && p.PPID == self {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
	_ = unix.Rmdir(c.dir)
}

// populated reports whether a process is still in the cgroup at dir.
func populated(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false
	}
	return !bytes.Contains(b, []byte("populated 0"))
}

// sweepStaleCgroups kills and removes the cgroups under base that bridges
// now gone left behind (a bridge that was SIGKILLed while a server that had
// killed its keeper still ran).
func sweepStaleCgroups(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || Alive(pid) {
			continue
		}
		dir := filepath.Join(base, e.Name())
		_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		_ = unix.Rmdir(dir) // fails while it empties; the next sweep finishes
	}
}

// ownCgroupDir is the directory of this process's cgroup v2 ("0::/path" in
// /proc/self/cgroup, under the cgroup2 mount), or "" when there is none.
func ownCgroupDir() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	var path string
	found := false
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			path, found = p, true
		}
	}
	if !found || !strings.HasPrefix(path, "/") || strings.Contains(path, "(deleted)") {
		return ""
	}
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer mi.Close()
	sc := bufio.NewScanner(mi)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		root, mount := unescapeMountinfo(f[3]), unescapeMountinfo(f[4])
		rel := path
		if root != "/" {
			r, ok := strings.CutPrefix(path, root)
			if !ok || (r != "" && !strings.HasPrefix(r, "/")) {
				continue
			}
			rel = r
		}
		return filepath.Join(mount, rel)
	}
	return ""
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out = append(out, byte(n))
				i += 3
				continue
			}
		}
		out = append(out, s[i])
	}
	return string(out)
}

// CgroupBase is the cgroup v2 directory under which each tool server gets a
// cgroup of its own (see cgroup), or "" where the system delegates none to
// this process: doctor reports it, so an admin knows which guarantee holds.
func CgroupBase() string {
	c := newCgroup()
	if c == nil {
		return ""
	}
	c.remove(0)
	return filepath.Dir(c.dir)
}

// Containment says, in one line, what holds a tool server's descendants on
// this machine (doctor prints it).
func Containment() string {
	if base := CgroupBase(); base != "" {
		return "each tool server runs in a cgroup of its own under " + base + ", killed whole when it ends, whatever its processes do to their group, session or parent"
	}
	return "each tool server runs in a process group under a keeper, and the bridge kills what a server leaves in a session of its own; no cgroup v2 is delegated to this user, so a process that kills its keeper and leads a group of its own in the bridge's session survives its server (give the bridge a delegated cgroup, e.g. systemd's Delegate=yes, for the stronger guarantee)"
}
