package child

// ProcInfo is one row of the process table.
type ProcInfo struct {
	PID, PPID int
	// Group is the process group id on Linux and macOS; the pid on Windows.
	Group int
	// State is 'Z' for a zombie (exited, not yet reaped), else the
	// system's state letter ('R', 'S', …; 'R' where the system has none).
	State byte
}
