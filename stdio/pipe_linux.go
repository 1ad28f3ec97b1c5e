package stdio

import (
	"os"

	"golang.org/x/sys/unix"
)

// stdoutPipeSize is the capacity asked for the pipe a server writes its
// stdout into: a long result then crosses in 1 MiB steps instead of the
// default 64 KiB, each of which wakes the reader and blocks the writer.
const stdoutPipeSize = 1 << 20

// growPipe asks the kernel for a larger pipe behind f. It is only a
// speed-up: where the kernel refuses (above fs.pipe-max-size for an
// unprivileged user, or over the user's pipe quota) the pipe stays as it
// was.
func growPipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, stdoutPipeSize)
	})
}
