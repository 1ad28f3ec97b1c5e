package child

import (
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
		out = append(out, ProcInfo{PID: int(pe.ProcessID), PPID: int(pe.ParentProcessID), Group: int(pe.ProcessID), State: 'R'})
	}
	return out
}

// Lookup is process pid's row of the process table.
func Lookup(pid int) (ProcInfo, bool) {
	for _, p := range Processes() {
		if p.PID == pid {
			return p, true
		}
	}
	return ProcInfo{}, false
}
