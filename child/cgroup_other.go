//go:build unix && !linux

package child

import "syscall"

// cgroup stands for Linux's per-server cgroup, which other systems lack.
type cgroup struct{}

// newCgroup returns nil: there is no cgroup v2 outside Linux.
func newCgroup() *cgroup { return nil }

func (c *cgroup) apply(*syscall.SysProcAttr) {}
func (c *cgroup) started()                   {}
func (c *cgroup) kill()                      {}
func (c *cgroup) remove(keeper int)          {}

// CgroupBase is "": only Linux has cgroups (see the Linux CgroupBase).
func CgroupBase() string { return "" }

// Containment says, in one line, what holds a tool server's descendants on
// this machine (doctor prints it).
func Containment() string {
	return "each tool server runs in a process group under a keeper; this system has no subreaper, so a process that leaves the group and loses its parent survives its server"
}
