//go:build !linux

package main

import "os"

// parentDeathWakeup has no kernel notice on this system: watchParent's poll
// alone notices the parent's death.
func parentDeathWakeup() (<-chan os.Signal, func()) {
	return nil, func() {}
}
