//go:build !linux

package main

import "time"

// treeCPU is not measured outside Linux: check reports the cancellation's
// CPU check as a warning.
func treeCPU(processTree) (map[int]time.Duration, error) {
	return nil, errCPUNotMeasured
}
