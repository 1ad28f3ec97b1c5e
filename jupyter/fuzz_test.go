package jupyter

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
)

func FuzzDecodeEntry(f *testing.F) {
	for _, seed := range []string{
		`{"command": "x", "args": ["${workspaceFolder}"], "env": {"A": "${env:HOME}"}, "cwd": "d"}`,
		`{"url": "https://x.example/mcp", "headers": {"A": "b"}}`,
		`{"type": "http", "url": "http://[::1]:80/"}`,
		`{"command": 1}`, `[]`, `null`, `"x"`, `{"url": "http://a@b/"}`,
	} {
		f.Add("name", seed)
	}
	e := Options{Environ: []string{"PATH=/nonexistent", "HOME=/h"}, RootDir: "/r"}.resolve()
	sc := substCtx{root: "/r", home: "/h", vars: e.vars, strip: DefaultAdmin().Strips}
	f.Fuzz(func(t *testing.T, name, raw string) {
		if !json.Valid([]byte(raw)) || strings.TrimSpace(raw) == "null" {
			return
		}
		ent, probs := decodeEntry(name, json.RawMessage(raw), source{file: "/f.json", level: LevelUser}, e, sc)
		if len(probs) > 0 {
			for _, p := range probs {
				if !strings.HasPrefix(p.Message, "/f.json") || p.Server != name {
					t.Fatalf("problem without file or server: %+v", p)
				}
			}
			return
		}
		if ent.Name != name || !strings.HasPrefix(ent.Fingerprint, "sha256:") || ent.Fingerprint != Fingerprint(ent) {
			t.Fatalf("bad entry %+v", ent)
		}
		if ent.Transport == bridge.TransportHTTP && checkURL(ent.URL) != "" {
			t.Fatalf("accepted a bad url %q", ent.URL)
		}
		for _, v := range ent.Env {
			if strings.Contains(v, "${") && !strings.Contains(raw, "$") {
				t.Fatal("substitution invented a variable")
			}
		}
	})
}

func FuzzSubstitute(f *testing.F) {
	for _, s := range []string{"${workspaceFolder}/x", "${userHome}", "${env:A}", "$x ${", "${env:}", "${foo}", "a${env:JUPYTER_TOKEN}"} {
		f.Add(s)
	}
	sc := substCtx{root: "/r", home: "/h", vars: map[string]string{"A": "v", "JUPYTER_TOKEN": "secret"}, strip: DefaultAdmin().Strips}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := substitute(s, sc)
		if err != nil {
			return
		}
		if strings.Contains(out, "secret") && !strings.Contains(s, "secret") {
			t.Fatalf("%q leaked a stripped variable: %q", s, out)
		}
		if !strings.Contains(s, "${") && out != s {
			t.Fatalf("%q changed without variables: %q", s, out)
		}
	})
}

func FuzzParseAdmin(f *testing.F) {
	for _, s := range []string{
		"allow_user_servers = false\n[limits]\nframe_limit = \"4MiB\"\n",
		"[mcp_servers.a]\ncommand = \"x\"\nargs = [\"y\"]\n",
		"strip_env = [\"A_*\"]\n[limits\n", "x = 1\n", "limits = 3\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		af, probs := parseAdmin("/a.toml", text)
		for _, p := range probs {
			if !strings.HasPrefix(p.Message, "/a.toml") {
				t.Fatalf("problem without file: %+v", p)
			}
		}
		if af == nil {
			if len(probs) != 1 {
				t.Fatalf("an unusable file must give exactly one problem, got %d", len(probs))
			}
			return
		}
		a := mergeAdmin([]*adminFile{af})
		if a.FrameLimit != 0 && (a.FrameLimit < 64<<10 || a.FrameLimit > 10<<20) {
			t.Fatalf("frame limit %d accepted", a.FrameLimit)
		}
	})
}
