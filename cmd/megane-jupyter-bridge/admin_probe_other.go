//go:build !linux

package main

import "errors"

// processArgs is the command line of process pid; not read on this system.
func processArgs(pid int) ([]string, error) {
	return nil, errors.New("process command lines are not read on this system")
}
