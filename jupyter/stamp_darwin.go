package jupyter

import (
	"os"
	"syscall"
)

// changeStamp is a file's inode and status-change time: a file replaced by
// a rename, or rewritten within the mtime's resolution, still differs.
type changeStamp struct {
	ino   uint64
	ctime syscall.Timespec
}

func changeStampOf(fi os.FileInfo) changeStamp {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return changeStamp{ino: st.Ino, ctime: st.Ctimespec}
	}
	return changeStamp{}
}
