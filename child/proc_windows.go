package child

import (
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Processes reads pid and parent pid of every process.
func Processes() []ProcInfo {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return nil
	}
	defer windows.CloseHandle(snap)
	var out []ProcInfo
	var pe windows.ProcessEntry32
	pe.Size = uint32(unsafe.Sizeof(pe))
	for err = windows.Process32First(snap, &pe); err == nil; err = windows.Process32Next(snap, &pe) {
		out = append(out, ProcInfo{PID: int(pe.ProcessID), PPID: int(pe.ParentProcessID), Group: int(pe.ProcessID), State: 'R',
			CPU: cpuTime(pe.ProcessID)})
	}
	return out
}

// cpuTime is the user and kernel time process pid has used, or 0.
func cpuTime(pid uint32) time.Duration {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
	if err != nil {
		return 0
	}
	defer windows.CloseHandle(h)
	var created, exited, kernel, user windows.Filetime
	if windows.GetProcessTimes(h, &created, &exited, &kernel, &user) != nil {
		return 0
	}
	ticks := func(f windows.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration(ticks(kernel)+ticks(user)) * 100 // 100 ns units
}

// CPUMeasured reports whether ProcInfo.CPU is filled in on this system.
func CPUMeasured() bool { return true }

// Lookup is process pid's row of the process table.
func Lookup(pid int) (ProcInfo, bool) {
	for _, p := range Processes() {
		if p.PID == pid {
			return p, true
		}
	}
	return ProcInfo{}, false
}
