package bridge

import (
	"strings"
	"testing"
)

// TestLabelsBoundedInLength: a server or tool name gets a label of its own
// only if it is short and printable; a tool listed with a 256 KiB name, or
// with control characters, is counted as "other", so that no server can
// make every scrape of /metrics hundreds of megabytes. The audit record
// bounds the same names.
func TestLabelsBoundedInLength(t *testing.T) {
	huge := strings.Repeat("t", 256<<10)
	for _, tc := range []struct {
		name, server, tool   string
		wantServer, wantTool string
	}{
		{"ordinary", "lab", "polymer_chain", "lab", "polymer_chain"},
		{"tool at the bound", "lab", strings.Repeat("a", metricsLabelMax), "lab", strings.Repeat("a", metricsLabelMax)},
		{"tool over the bound", "lab", strings.Repeat("a", metricsLabelMax+1), "lab", labelOther},
		{"256 KiB tool name", "lab", huge, "lab", labelOther},
		{"control characters", "lab", "x\x1b[2J", "lab", labelOther},
		{"not UTF-8", "lab", "x\xff", "lab", labelOther},
		{"256 KiB server name", huge, "t", labelOther, labelOther},
		{"non-ASCII is fine", "lab", "分子", "lab", "分子"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &meters{servers: map[string]map[string]struct{}{}, started: map[string]bool{}}
			s, tl := m.labels(tc.server, tc.tool, true)
			if s != tc.wantServer || tl != tc.wantTool {
				t.Fatalf("labels = %.40q, %.40q; want %.40q, %.40q", s, tl, tc.wantServer, tc.wantTool)
			}
		})
	}
	if got := shown(huge); len(got) > auditShown+len("…") {
		t.Fatalf("the audit record keeps %d bytes of a 256 KiB name", len(got))
	}
	t.Logf("abuse: a server lists tools named with 256 KiB, or with control characters | labels of 128 bytes at most, odd names counted as other; the audit record keeps 200 bytes | every case as bounded")
}
