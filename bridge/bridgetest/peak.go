package bridgetest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// PeakEnv, when set, makes PeakReport print the test binary's peak RSS
// after its tests (make abuse sets it).
const PeakEnv = "MEGANE_ABUSE_PEAK"

// PeakReport wraps a test binary's testing.M: after the tests, when PeakEnv
// is set, it prints an abuse row with the process's peak RSS (VmHWM, read
// from /proc; "unknown" where there is none), for make abuse's table: the
// in-process abuse tests run their bridges in this process.
type PeakReport struct {
	M   interface{ Run() int }
	Pkg string
}

// Run runs the tests, then reports.
func (p PeakReport) Run() int {
	code := p.M.Run()
	if os.Getenv(PeakEnv) != "" {
		peak := "unknown"
		if kb := statusKB("VmHWM:"); kb > 0 {
			peak = strconv.FormatInt(kb>>10, 10) + " MiB"
		}
		fmt.Printf("    abuse: every test of %s that ran, in one process (their bridges included) | the process's peak RSS (VmHWM) | %s\n", p.Pkg, peak)
	}
	return code
}

func statusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}
