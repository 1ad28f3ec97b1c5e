//go:build unix

package child

// EnvKey is the form in which the system compares an environment
// variable's name: as it is on Linux and macOS.
func EnvKey(name string) string { return name }
