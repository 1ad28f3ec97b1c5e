package jupyter

import (
	"os"
	"syscall"
)

// changeStamp is a file's creation time: Windows reports no inode or
// status-change time through os.Stat, so a file replaced by a rename shows
// by its creation time (and its size and modification time, which the
// stamp compares too).
type changeStamp struct {
	created syscall.Filetime
}

func changeStampOf(fi os.FileInfo) changeStamp {
	if d, ok := fi.Sys().(*syscall.Win32FileAttributeData); ok {
		return changeStamp{created: d.CreationTime}
	}
	return changeStamp{}
}
