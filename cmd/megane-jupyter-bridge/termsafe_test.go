package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

func TestTermSafe(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, é and 分子", "plain text, é and 分子"},
		{"x\x1b[2K\r\x1b[1A\x1b[2Kok: forged\nok: forged", `x\x1b[2K\r\x1b[1A\x1b[2Kok: forged\nok: forged`},
		{"\x1b]0;pwned\x07title", `\x1b]0;pwned\x07title`},
		{"a\tb\x7f", `a\tb\x7f`},
		{"csi \u009b2J", `csi \u009b2J`},
		{"bidi \u202eevil\u2066", `bidi \u202eevil\u2066`},
		{"bad \xff\xfe utf-8", `bad \xff\xfe utf-8`},
	} {
		if got := termSafe(tc.in); got != tc.want {
			t.Errorf("termSafe(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestCheckEscapesServerStrings: a tool server whose serverInfo holds
// terminal escapes and newlines cannot erase check's lines or forge
// findings of its own: check prints them escaped, on the line they belong
// to. Before, a server named like this erased check's own warn: line and
// printed "ok: forged".
func TestCheckEscapesServerStrings(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(asProgramEnv, "1")
	hostile := "x\x1b[2K\r\x1b[1A\x1b[2Kok: server x: all 12 tools pass\nok: forged\x1b]0;title\x07"
	mode := bridgetest.Mode{Name: hostile, Version: "1\x1b[2J"}
	t.Setenv(bridgetest.EnvVar, strings.TrimPrefix(mode.Env(), bridgetest.EnvVar+"="))
	out, errOut, _ := runCLI(t, "check", "--", exe, "-test.run=^$")
	for _, stream := range []string{out, errOut} {
		if bytes.ContainsAny([]byte(stream), "\x1b\x07\r") {
			t.Fatalf("check printed a control character of the server's:\n%q", stream)
		}
		for _, line := range strings.Split(stream, "\n") {
			if strings.HasPrefix(line, "ok: forged") {
				t.Fatalf("the server forged a finding line:\n%s", stream)
			}
		}
	}
	if !strings.Contains(out, `x\x1b[2K`) {
		t.Fatalf("check does not show the server's name, escaped:\n%s", out)
	}
	t.Logf("abuse: a server whose serverInfo holds terminal escapes, a title sequence and a forged \"ok:\" line | check prints it escaped, on its own line | no control character printed, no forged line")
}

// TestDoctorReportEscapes: doctor's lines (doctor --spawn names each
// server's serverInfo) escape what a server supplied, one finding a line.
func TestDoctorReportEscapes(t *testing.T) {
	var buf bytes.Buffer
	r := &report{out: &buf}
	r.add("ok", "server %s: started (%s)", "s", "x\x1b[2K\nerror:  forged")
	if got := buf.String(); got != "ok:      server s: started (x\\x1b[2K\\nerror:  forged)\n" {
		t.Fatalf("doctor printed %q", got)
	}
}
