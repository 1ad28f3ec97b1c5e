package child

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestStopLadder runs Stop's steps in virtual time: a server that leaves
// when its stdin closes is never signalled; one that leaves on SIGTERM (or
// CTRL_BREAK) is asked exactly after terminate and never killed; one that
// ignores it is killed exactly terminate+kill after Stop began; Stop
// returns when the server is gone, not before.
func TestStopLadder(t *testing.T) {
	const terminate, kill = 5 * time.Second, 3 * time.Second
	never := time.Duration(-1)
	cases := []struct {
		name string
		// when the server exits, counted from Stop, from the interrupt, or
		// from the kill; never when it does not on that step
		onStdin, onInterrupt time.Duration
		wantInterrupt        time.Duration // when interrupt is called; never if not
		wantKill             time.Duration // when the group is killed; never if not
		wantReturn           time.Duration
	}{
		{"already gone", 0, never, never, never, 0},
		{"leaves when stdin closes", time.Second, never, never, never, time.Second},
		{"leaves on interrupt", never, 2 * time.Second, terminate, never, terminate + 2*time.Second},
		{"ignores interrupt", never, never, terminate, terminate + kill, terminate + kill},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				done := make(chan struct{})
				exitAfter := func(d time.Duration) {
					if d >= 0 {
						time.AfterFunc(d, func() { close(done) })
					}
				}
				interrupted, killed := never, never
				exitAfter(tc.onStdin)
				stopInSteps(done, terminate, kill,
					func() { interrupted = time.Since(start); exitAfter(tc.onInterrupt) },
					func() { killed = time.Since(start); close(done) })
				if got := time.Since(start); got != tc.wantReturn {
					t.Errorf("Stop returned after %v, want %v", got, tc.wantReturn)
				}
				if interrupted != tc.wantInterrupt {
					t.Errorf("interrupt at %v, want %v (-1ns: never)", interrupted, tc.wantInterrupt)
				}
				if killed != tc.wantKill {
					t.Errorf("kill at %v, want %v (-1ns: never)", killed, tc.wantKill)
				}
			})
		})
	}
}
