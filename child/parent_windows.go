package child

import (
	"os"

	"golang.org/x/sys/windows"
)

// parentWatch holds a handle of the parent process, opened when the watch
// starts; the parent is gone when the handle is signalled.
type parentWatch struct {
	h    windows.Handle // 0 if the parent could not be opened
	dead bool           // it could not be opened because it is gone
	wake <-chan os.Signal
}

func newParentWatch(ppid int, _ bool) *parentWatch {
	h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(ppid))
	if err != nil {
		return &parentWatch{dead: err == windows.ERROR_INVALID_PARAMETER}
	}
	return &parentWatch{h: h}
}

// gone reports whether the parent has exited. A parent that could not be
// opened at the start was already gone unless access was refused.
func (w *parentWatch) gone() bool {
	if w.h == 0 {
		return w.dead
	}
	ev, err := windows.WaitForSingleObject(w.h, 0)
	return err == nil && ev == windows.WAIT_OBJECT_0
}

func (w *parentWatch) release() {
	if w.h != 0 {
		windows.CloseHandle(w.h)
	}
}
