package bridgetest

import (
	"net"
	"testing"
)

// FreePort returns a loopback TCP port that was free a moment ago, for a
// server a test starts as a process.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
