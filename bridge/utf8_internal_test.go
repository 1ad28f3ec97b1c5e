package bridge

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkResultUTF8Check measures what the UTF-8 check of a result
// costs (issue 28): a 40 MB tools/call response, mostly ASCII numbers with
// some text in other scripts, through the tap as the bridge takes every
// result (without), and the same with the check the bridge now makes
// (with). The difference of the two, per 40 MB, is the check's cost;
// check-only is the check alone.
func BenchmarkResultUTF8Check(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"40 MB"}],"structuredContent":{"positions":[`)
	for i := 0; sb.Len() < 40e6; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%.4f,%.4f,%.4f", float64(i)*0.1234, float64(i)*0.5678, float64(i)*0.9012)
		if i%500 == 0 {
			sb.WriteString(`,"水分子 Å é"`)
		}
	}
	sb.WriteString(`]}}}`)
	line := []byte(sb.String())
	b.Run("check-only", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			if invalidUTF8At(line) >= 0 {
				b.Fatal("not UTF-8")
			}
		}
	})
	for _, with := range []bool{false, true} {
		name := "without"
		if with {
			name = "with"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				tp := newTap(nil)
				slot := &rawSlot{}
				tp.expectCall("t", slot)
				tp.outgoingCall("tools/call", "n:7", []byte(`{"_meta":{"progressToken":"t"}}`))
				tp.response(bytes.Clone(line))
				raw, _, got := slot.get()
				if !got {
					b.Fatal("no result")
				}
				if with && invalidUTF8At(raw) >= 0 {
					b.Fatal("not UTF-8")
				}
			}
		})
	}
}
