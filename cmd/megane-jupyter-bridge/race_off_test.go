//go:build !race

package main

// raceEnabled: this test binary has the race detector, which multiplies memory.
const raceEnabled = false
