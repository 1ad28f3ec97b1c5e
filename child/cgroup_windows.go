package child

// CgroupBase is "": on Windows the Job Object holds a server's descendants.
func CgroupBase() string { return "" }

// Containment says, in one line, what holds a tool server's descendants on
// this machine (doctor prints it).
func Containment() string {
	return "each tool server runs in a Job Object that nothing it starts can leave, killed whole when it ends or the bridge exits"
}
