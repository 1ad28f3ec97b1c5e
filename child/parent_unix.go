//go:build unix

package child

import "os"

// parentWatch compares the parent id with the one the watch started with.
type parentWatch struct {
	ppid    int
	wake    <-chan os.Signal // the kernel's notice, or nil
	release func()
}

func newParentWatch(ppid int, notice bool) *parentWatch {
	w := &parentWatch{ppid: ppid, release: func() {}}
	if notice {
		w.wake, w.release = parentDeathWakeup()
	}
	return w
}

func (w *parentWatch) gone() bool { return os.Getppid() != w.ppid }
