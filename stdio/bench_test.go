package stdio

import (
	"context"
	"os/exec"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// BenchmarkStartStop measures what supervision costs a server's start and
// stop: the transport (a keeper and its process group, or a Job Object on
// Windows; stop by closing stdin) against a bare exec of the same server
// stopped the same way, in the same run.
func BenchmarkStartStop(b *testing.B) {
	opts := serverOptions(b, bridgetest.Mode{})
	b.Run("exec (baseline)", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command(opts.Command, opts.Args...)
			cmd.Env = opts.Env
			stdin, err := cmd.StdinPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("transport", func(b *testing.B) {
		for b.Loop() {
			conn, err := NewTransport(opts).Connect(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if err := conn.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
