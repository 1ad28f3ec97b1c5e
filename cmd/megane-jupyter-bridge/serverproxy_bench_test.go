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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// BenchmarkJupyterHop measures what the Jupyter hop costs a large result:
// a 40 MB water box (the bridgetest atoms tool, n = 500,000) served from a
// fixture, so that the tool server's own work does not hide the hop, from
// one bridge started by jupyter-server-proxy inside a Jupyter server, asked
// once directly on its port and once through Jupyter's URL, alternately, in
// the same run. Rows: the real jupyter-server-proxy 4.4.0 in jupyter_server
// 2.15 (the Debian 13 chroot; where users are), and the stand-in in
// jupyter_server 1.23 with one sub-benchmark per frame limit (the chunk
// size of a large message, the admin setting [limits] frame_limit).
//
// Metrics: alone-ms/op and proxied-ms/op (one call each per op) and
// proxied/alone, the ratio of the two (target ≤ 1.2); the same page
// through Jupyter with binary chunk frames (proxied-binary-ms/op) and with
// streamed results (proxied-stream-ms/op); behind the real proxy and the
// Hub, a plain gorilla server started by the same jupyter-server-proxy,
// sending the reply as one message (plain-ms/op), and
// proxied-stream/plain (target ≤ 1.15).
// MEGANE_BENCH_OLD_BRIDGE=BINARY (the benchmark harness's -old-bridge)
// adds, behind the real proxy and the Hub, an earlier bridge binary
// registered beside this one as "megane-old", its page asking for what the
// client module of its day asked (binary frames), timed in the same
// alternation (old-ms/op) with proxied-stream/old (target < 1).
// MEGANE_TEST_PROXY_PROFILE=FILE writes a cProfile of the Jupyter server
// (tornado's relay) per frame limit to FILE.<limit> (stand-in rows), and
// to FILE.real_proxy (the real jupyter-server-proxy's row).
func BenchmarkJupyterHop(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	fixture := atomsFixture(b, exe, 500000)
	b.Run("real_proxy/jupyter_server=2.15/frame_limit=8MiB", func(b *testing.B) {
		root := jupytertest.Trixie(b)
		// The bridge's binary and the fixture, inside the chroot.
		dir, err := os.MkdirTemp(filepath.Join(root, "tmp"), "megane-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		inner := strings.TrimPrefix(dir, root)
		for _, f := range [][2]string{{exe, "megane-jupyter-bridge"}, {fixture, "atoms.json"}} {
			data, err := os.ReadFile(f[0])
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f[1]), data, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		bin := inner + "/megane-jupyter-bridge"
		cfg := withPlainWS(b, proxiedConfigMode(b, bin, bin, false, bridgetest.Mode{FixtureCalls: map[string]string{"atoms": inner + "/atoms.json"}}), bin, inner+"/atoms.json")
		if old := os.Getenv(oldBridgeEnv); old != "" {
			copyExecutable(b, old, filepath.Join(dir, "megane-old"))
			cfg = withOldBridge(b, cfg, inner+"/megane-old")
		}
		files := map[string]string{
			"config/jupyter_server_config.json": cfg,
			"admin/megane_jupyter_bridge.toml":  "[limits]\nframe_limit = \"8MiB\"\n",
		}
		profile := os.Getenv("MEGANE_TEST_PROXY_PROFILE")
		if profile != "" {
			// The server's main thread, where tornado and the proxy's
			// aiohttp client run, profiled from its configuration on.
			files["config/jupyter_server_config.py"] = "import atexit, cProfile\n_megane_profile = cProfile.Profile()\n_megane_profile.enable()\n" +
				"atexit.register(_megane_profile.dump_stats, " + strconv.Quote(inner+"/proxy.prof") + ")\n"
		}
		j := jupytertest.Start(b, jupytertest.Spec{Root: root, RealServerProxy: true,
			Env:    []string{asProgramEnv + "=1"},
			DirEnv: map[string]string{"JUPYTER_CONFIG_PATH": "admin"},
			Files:  files,
		})
		// The real proxy logs the bridge's port for each socket.
		hopVia(b, j.URL, j.Token, j.HostHdr, j.Out, `ws://localhost:(\d+)/`, j.URL)
		if profile != "" {
			j.Stop() // the profile is written at exit
			data, err := os.ReadFile(filepath.Join(dir, "proxy.prof"))
			if err != nil {
				b.Fatalf("no profile from the Jupyter server: %v\n%s", err, j.Out)
			}
			if err := os.WriteFile(profile+".real_proxy", data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hub/jupyterhub=5.2+configurable-http-proxy+real_proxy/frame_limit=8MiB", func(b *testing.B) {
		// The Hub test's deployment (hub_e2e_test.go): carol's server,
		// spawned by JupyterHub 5 behind configurable-http-proxy, runs the
		// real jupyter-server-proxy, which starts the bridge; the page
		// speaks to the Hub's public address.
		root := jupytertest.Trixie(b)
		files := map[string]string{"home/carol/.jupyter/jupyter_server_config.py": jupytertest.HubExample(b, "jupyter_server_config.py")}
		h := jupytertest.StartHub(b, jupytertest.HubSpec{Root: root, Config: hubE2EConfig, Files: files})
		bin := filepath.Join(h.Inner, "bin", "megane-jupyter-bridge")
		copyExecutable(b, exe, h.Path("bin/megane-jupyter-bridge"))
		copyExecutable(b, fixture, h.Path("bin/atoms.json"))
		cfgDir := h.Path("home/carol/.jupyter")
		cfg := withPlainWS(b, proxiedConfigMode(b, bin, bin, false, bridgetest.Mode{FixtureCalls: map[string]string{"atoms": filepath.Join(h.Inner, "bin", "atoms.json")}}), bin, filepath.Join(h.Inner, "bin", "atoms.json"))
		if old := os.Getenv(oldBridgeEnv); old != "" {
			copyExecutable(b, old, h.Path("bin/megane-old"))
			cfg = withOldBridge(b, cfg, filepath.Join(h.Inner, "bin", "megane-old"))
		}
		if err := os.WriteFile(filepath.Join(cfgDir, "jupyter_server_config.json"), []byte(cfg), 0o644); err != nil {
			b.Fatal(err)
		}
		jupytertest.RealServerProxy(b, root, h.Path("pylib"), cfgDir)
		h.Spawn(b, "carol")
		hopVia(b, h.Public+"user/carol/", h.Token(b, "carol", nil), h.HostHdr, h.Out, `ws://localhost:(\d+)/`, h.Public+"user/carol/")
	})
	for _, frame := range []string{"1MiB", "2MiB", "4MiB", "8MiB"} {
		b.Run("stand-in/jupyter_server=1.23/frame_limit="+frame, func(b *testing.B) {
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
			// The stand-in says which port the bridge has.
			hop(b, j, `--port=(\d+)`)
		})
	}
}

// hop runs the alternating calls of BenchmarkJupyterHop against the bridge
// behind j, whose port portRE finds in j's output once a socket is open.
func hop(b *testing.B, j *jupytertest.Server, portRE string) {
	hopVia(b, j.URL, j.Token, j.HostHdr, j.Out, portRE, "")
}

// hopVia is hop for the bridge behind publicBase (a Jupyter server's URL,
// or a user's server's at a Hub's public address), admitted with token;
// the bridge's own port is dialled with Host hostHdr, and found by portRE
// in out.
func hopVia(b *testing.B, publicBase, token, hostHdr string, out *bridgetest.Buffer, portRE, plainBase string) {
	auth := http.Header{"Authorization": {"token " + token}}
	proxied, _, err := proxiedPage(b, publicBase, "", auth)
	if err != nil {
		b.Fatalf("through Jupyter: %v\n%s", err, out)
	}
	connectBridgetest(b, proxied)
	// The same through Jupyter with binary chunk frames (the feature
	// "binary", which the client module asks for).
	binary, _, err := proxiedPage(b, publicBase, "", auth)
	if err != nil {
		b.Fatalf("through Jupyter: %v\n%s", err, out)
	}
	hctx, hcancel := context.WithTimeout(context.Background(), time.Minute)
	defer hcancel()
	if r, err := binary.Request(hctx, map[string]any{"type": "tools:hello", "id": "h", "features": []string{"binary"}}); err != nil || !strings.Contains(r.String(), `"features":["binary"]`) {
		b.Fatalf("hello with binary: %v %v", err, r)
	}
	connectBridgetest(b, binary)
	// Streamed results (the feature "stream", which the client module
	// asks for too).
	stream, _, err := proxiedPage(b, publicBase, "", auth)
	if err != nil {
		b.Fatalf("through Jupyter: %v\n%s", err, out)
	}
	if r, err := stream.Request(hctx, map[string]any{"type": "tools:hello", "id": "h", "features": []string{"binary", "stream"}}); err != nil || !strings.Contains(r.String(), `"features":["binary","stream"]`) {
		b.Fatalf("hello with stream: %v %v", err, r)
	}
	connectBridgetest(b, stream)
	// The baseline where there is one: a plain gorilla server behind the
	// same proxies, sending the reply as one message.
	var plain *bridgetest.Page
	if plainBase != "" {
		if plain, _, err = bridgetest.Dial(hctx, plainWSURL(plainBase), auth); err != nil {
			b.Fatalf("the plain server through Jupyter: %v\n%s", err, out)
		}
		defer plain.Close()
	}
	// The earlier binary, where there is one (behind the real proxy and
	// the Hub), with the page of its day.
	var older *bridgetest.Page
	if plainBase != "" && os.Getenv(oldBridgeEnv) != "" {
		if older, _, err = bridgetest.Dial(hctx, "ws"+strings.TrimPrefix(plainBase, "http")+"megane-old/builder-tools/ws", auth); err != nil {
			b.Fatalf("the earlier bridge through Jupyter: %v\n%s", err, out)
		}
		defer older.Close()
		if r, err := older.Request(hctx, map[string]any{"type": "tools:hello", "id": "h", "features": []string{"binary"}}); err != nil || !strings.Contains(r.String(), `"features":["binary"]`) {
			b.Fatalf("hello with binary, to the earlier bridge: %v %v", err, r)
		}
		connectBridgetest(b, older)
	}
	m := regexp.MustCompile(portRE).FindStringSubmatch(out.String())
	if m == nil {
		b.Fatalf("no bridge port (%s) in Jupyter's output:\n%s", portRE, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alone, _, err := bridgetest.Dial(ctx, "ws://127.0.0.1:"+m[1]+"/builder-tools/ws",
		http.Header{"Authorization": {"token " + token}, "Host": {hostHdr}})
	if err != nil {
		b.Fatalf("the bridge's own port: %v", err)
	}
	defer alone.Close()
	connectBridgetest(b, alone)
	want := callAtoms(b, alone, "warm-a", 1)
	if got := callAtoms(b, proxied, "warm-p", 1); string(got) != string(want) {
		b.Fatalf("the proxied result differs")
	}
	if got := callAtoms(b, binary, "warm-b", 1); string(got) != string(want) {
		b.Fatalf("the proxied result in binary frames differs")
	}
	if got := callAtoms(b, stream, "warm-s", 1); string(got) != string(want) || len(stream.Streams()) == 0 {
		b.Fatalf("the proxied result streamed differs, or was not streamed")
	}
	if plain != nil {
		if got := callAtoms(b, plain, "warm-g", 1); string(got) != string(want) {
			b.Fatalf("the plain server's result differs")
		}
	}
	if older != nil {
		if got := callAtoms(b, older, "warm-o", 1); string(got) != string(want) {
			b.Fatalf("the earlier bridge's result differs")
		}
	}
	var tAlone, tProxied, tBinary, tStream, tPlain, tOld time.Duration
	b.SetBytes(int64(len(want)) * 3)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		callAtoms(b, alone, fmt.Sprintf("a%d", i), 1)
		tAlone += time.Since(start)
		start = time.Now()
		callAtoms(b, proxied, fmt.Sprintf("p%d", i), 1)
		tProxied += time.Since(start)
		start = time.Now()
		callAtoms(b, binary, fmt.Sprintf("b%d", i), 1)
		tBinary += time.Since(start)
		start = time.Now()
		callAtoms(b, stream, fmt.Sprintf("s%d", i), 1)
		tStream += time.Since(start)
		if plain != nil {
			start = time.Now()
			callAtoms(b, plain, fmt.Sprintf("g%d", i), 1)
			tPlain += time.Since(start)
		}
		if older != nil {
			start = time.Now()
			callAtoms(b, older, fmt.Sprintf("o%d", i), 1)
			tOld += time.Since(start)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tAlone.Milliseconds())/n, "alone-ms/op")
	b.ReportMetric(float64(tProxied.Milliseconds())/n, "proxied-ms/op")
	b.ReportMetric(tProxied.Seconds()/tAlone.Seconds(), "proxied/alone")
	b.ReportMetric(float64(tBinary.Milliseconds())/n, "proxied-binary-ms/op")
	b.ReportMetric(tBinary.Seconds()/tAlone.Seconds(), "proxied-binary/alone")
	b.ReportMetric(float64(tStream.Milliseconds())/n, "proxied-stream-ms/op")
	if plain != nil {
		b.ReportMetric(float64(tPlain.Milliseconds())/n, "plain-ms/op")
		b.ReportMetric(tStream.Seconds()/tPlain.Seconds(), "proxied-stream/plain")
	}
	if older != nil {
		b.ReportMetric(float64(tOld.Milliseconds())/n, "old-ms/op")
		b.ReportMetric(tStream.Seconds()/tOld.Seconds(), "proxied-stream/old")
	}
}

// oldBridgeEnv names an earlier megane-jupyter-bridge binary for
// BenchmarkJupyterHop to compare with (see there).
const oldBridgeEnv = "MEGANE_BENCH_OLD_BRIDGE"

// withOldBridge adds to the Jupyter configuration cfg the registration
// install writes, for the earlier binary old (its path as the server sees
// it), under the name megane-old: it reads the same MeganeBuilderTools.
func withOldBridge(t testing.TB, cfg, old string) string {
	t.Helper()
	return withProxyServer(t, cfg, "megane-old", jupyter.Registration(old, "", false))
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
