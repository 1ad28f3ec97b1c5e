package child

// RunKeeperIfRequested returns at once: on Windows a Job Object does the
// keeper's work, and no keeper process is started.
func RunKeeperIfRequested() {}
