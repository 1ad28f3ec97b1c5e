package child

import (
	"os"
	"os/signal"
	"runtime"
	"syscall"
)

// parentDeathSignal is the signal the kernel sends when the bridge's parent
// thread exits. SIGUSR1 rather than SIGTERM: it may come while the parent
// process lives (another of its threads forked the bridge and exited), so
// it only wakes watchParent, which then asks getppid.
const parentDeathSignal = syscall.SIGUSR1

// parentDeathWakeup asks the kernel (prctl PR_SET_PDEATHSIG) to send
// parentDeathSignal when the parent exits, and returns the channel it
// arrives on and the function that undoes all of it. The setting belongs to
// the calling thread, so the calling goroutine stays locked to its thread
// until release, which clears the setting before it stops listening (the
// signal's default action would end the process). If prctl fails the
// channel is nil: the poll alone notices.
func parentDeathWakeup() (<-chan os.Signal, func()) {
	runtime.LockOSThread()
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, parentDeathSignal)
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(parentDeathSignal), 0); errno != 0 {
		signal.Stop(ch)
		runtime.UnlockOSThread()
		return nil, func() {}
	}
	return ch, func() {
		syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, 0, 0)
		signal.Stop(ch)
		runtime.UnlockOSThread()
	}
}
