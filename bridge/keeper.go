package bridge

// RunKeeperIfRequested is replaced by the stdio transport work.
func RunKeeperIfRequested() {}
