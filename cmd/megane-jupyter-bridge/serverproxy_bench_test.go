package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// BenchmarkJupyterHop measures what the Jupyter hop costs a large result:
// a 40 MB water box (the bridgetest atoms tool, n = 500,000) served from a
// fixture, so that the tool server's own work does not hide the hop, from
// one bridge started by the jupyter-server-proxy stand-in inside
// jupyter_server 1.23, asked once directly on its port and once through
// Jupyter's URL (tornado's relay), alternately, in the same run. One
// sub-benchmark per frame limit (the chunk size of a large message),
// set by the admin setting [limits] frame_limit.
//
// Metrics: alone-ms/op and proxied-ms/op (one call each per op) and
// proxied/alone, the ratio of the two (target ≤ 1.2).
// MEGANE_TEST_PROXY_PROFILE=FILE writes a cProfile of the Jupyter server
// (tornado's relay) per frame limit to FILE.<limit>.
func BenchmarkJupyterHop(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	fixture := atomsFixture(b, exe, 500000)
	for _, frame := range []string{"1MiB", "2MiB", "4MiB", "8MiB"} {
		b.Run("frame_limit="+frame, func(b *testing.B) {
			env := []string{asProgramEnv + "=1"}
			if p := os.Getenv("MEGANE_TEST_PROXY_PROFILE"); p != "" {
				env = append(env, "MEGANE_TEST_PROXY_PROFILE="+p+"."+frame)
			}
			j := jupytertest.Start(b, jupytertest.Spec{ServerProxy: true,
				Env:    env,
				DirEnv: map[string]string{"JUPYTER_CONFIG_PATH": "admin"},
				Files: map[string]string{
					"config/jupyter_server_config.json": proxiedConfigMode(b, exe, exe, false, bridgetest.Mode{FixtureCalls: map[string]string{"atoms": fixture}}),
					"admin/megane_jupyter_bridge.toml":  "[limits]\nframe_limit = \"" + frame + "\"\n",
				},
			})
			token := http.Header{"Authorization": {"token " + j.Token}}
			proxied, _, err := proxiedPage(b, j.URL, "", token)
			if err != nil {
				b.Fatalf("through Jupyter: %v\n%s", err, j.Out)
			}
			connectBridgetest(b, proxied)
			m := regexp.MustCompile(`--port=(\d+)`).FindStringSubmatch(j.Out.String())
			if m == nil {
				b.Fatalf("the stand-in did not say which port the bridge has:\n%s", j.Out)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			alone, _, err := bridgetest.Dial(ctx, "ws://127.0.0.1:"+m[1]+"/builder-tools/ws",
				http.Header{"Authorization": {"token " + j.Token}, "Host": {j.HostHdr}})
			if err != nil {
				b.Fatalf("the bridge's own port: %v", err)
			}
			defer alone.Close()
			connectBridgetest(b, alone)
			want := callAtoms(b, alone, "warm-a", 1)
			if got := callAtoms(b, proxied, "warm-p", 1); string(got) != string(want) {
				b.Fatalf("the proxied result differs")
			}
			var tAlone, tProxied time.Duration
			b.SetBytes(int64(len(want)) * 2)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				callAtoms(b, alone, fmt.Sprintf("a%d", i), 1)
				tAlone += time.Since(start)
				start = time.Now()
				callAtoms(b, proxied, fmt.Sprintf("p%d", i), 1)
				tProxied += time.Since(start)
			}
			n := float64(b.N)
			b.ReportMetric(float64(tAlone.Milliseconds())/n, "alone-ms/op")
			b.ReportMetric(float64(tProxied.Milliseconds())/n, "proxied-ms/op")
			b.ReportMetric(tProxied.Seconds()/tAlone.Seconds(), "proxied/alone")
		})
	}
}

// atomsFixture asks a bridgetest server (exe) for the atoms result with n
// atoms over stdio and writes it as a call fixture (keys name, arguments,
// result) for Mode.FixtureCalls.
func atomsFixture(b *testing.B, exe string, n int) string {
	b.Helper()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), bridgetest.Mode{}.Env())
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	fmt.Fprintf(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`+"\n")
	fmt.Fprintf(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	fmt.Fprintf(in, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"atoms","arguments":{"n":%d,"seed":7}}}`+"\n", n)
	r := bufio.NewReaderSize(out, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			b.Fatalf("atoms fixture: %v", err)
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(line, &msg) == nil && string(msg.ID) == "2" {
			fix, _ := json.Marshal(map[string]any{"name": "atoms", "arguments": map[string]any{}, "result": msg.Result})
			path := filepath.Join(b.TempDir(), "atoms.json")
			if err := os.WriteFile(path, fix, 0o600); err != nil {
				b.Fatal(err)
			}
			return path
		}
		if strings.Contains(string(line), `"error"`) && strings.Contains(string(line), `"id":2`) {
			b.Fatalf("atoms fixture: %s", line)
		}
	}
}
