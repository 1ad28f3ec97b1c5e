package bridge_test

import (
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
)

// TestLoopbackHost: which tool server URLs may use plain http.
func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LocalHost": true, "127.0.0.1": true, "127.8.9.10": true, "::1": true,
		// The system resolver may ask DNS for these: never plaintext.
		"tools.localhost": false, "localhost.example.org": false,
		"example.org": false, "10.0.0.1": false, "::ffff:10.0.0.1": false, "": false,
	} {
		if got := bridge.LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
