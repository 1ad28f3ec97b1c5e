package bridge_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// TestPathsAtEveryBaseURL: whatever its base URL, the bridge answers both
// forms jupyter-server-proxy forwards (absolute_url false: the prefix
// {base}megane stripped; true: the whole path), for a Jupyter server at /,
// at /lab/base/, and for JupyterHub user and named servers. Under the Hub
// the stripped form was answered 404 and every page saw a drop (1006).
func TestPathsAtEveryBaseURL(t *testing.T) {
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "page:"+r.URL.Path) })
	for _, base := range []string{"/", "/lab/base/", "/user/alice/", "/user/alice/second/", "/user/a%C3%A9/"} {
		t.Run(base, func(t *testing.T) {
			h := newHarness(t, bridge.Options{BaseURL: base, Page: page})
			root := strings.TrimSuffix(h.srv.URL, "/")
			for _, mode := range []struct{ name, prefix string }{
				{"absolute_url false", ""},
				{"absolute_url true", strings.TrimSuffix(base, "/") + "/megane"},
			} {
				t.Run(mode.name, func(t *testing.T) {
					ctx := testCtx(t, 30*time.Second)
					p, _, err := bridgetest.Dial(ctx, "ws"+strings.TrimPrefix(root, "http")+mode.prefix+"/builder-tools/ws", nil)
					if err != nil {
						t.Fatalf("socket at %s/builder-tools/ws: %v", mode.prefix, err)
					}
					defer p.Close()
					m, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": 1})
					if err != nil || m.Type != "tools:servers" {
						t.Fatalf("tools:servers: %v %v", m, err)
					}
					for path, want := range map[string]string{
						"/builder-tools/":        "page:/",
						"/builder-tools/app.js":  "page:/app.js",
						"/builder-tools/sub/x.y": "page:/sub/x.y",
					} {
						if got := get(t, root+mode.prefix+path, 200); got != want {
							t.Errorf("GET %s%s: %q, want %q", mode.prefix, path, got, want)
						}
					}
					// Without the trailing slash: a relative redirect, which
					// holds behind any proxy prefix.
					resp := getResp(t, root+mode.prefix+"/builder-tools?token=x")
					if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "builder-tools/?token=x" {
						t.Errorf("GET %s/builder-tools: %s, Location %q", mode.prefix, resp.Status, resp.Header.Get("Location"))
					}
				})
			}
			// jupyter-server-proxy's readiness probe is GET / in both modes.
			if got := get(t, root+"/", 200); !strings.Contains(got, "megane-jupyter-bridge") || !strings.Contains(got, "The status page and tool runner are at "+base+"megane/builder-tools/") {
				t.Errorf("readiness probe: %q; want the bridge's name and where the status page is", got)
			}
			get(t, root+base, 200)
			get(t, root+base+"megane/", 200)
			if base != "/" {
				// The form that neither mode forwards is not served.
				get(t, root+base+"builder-tools/ws", 404)
			}
		})
	}
}

// TestUnservedPathIsLoggedOnce: a 404 is logged once per path, naming the
// paths served, without the query; a flood of distinct paths is cut at the
// rate limit.
func TestUnservedPathIsLoggedOnce(t *testing.T) {
	h := newHarness(t, bridge.Options{BaseURL: "/user/alice/"})
	root := strings.TrimSuffix(h.srv.URL, "/")
	for range 3 {
		get(t, root+"/user/alice/builder-tools/ws?token=SECRET", 404)
	}
	for i := range 50 {
		get(t, root+"/flood/"+strings.Repeat("x", i), 404)
	}
	logs := h.logBuf.String()
	lines := strings.Count(logs, "path not served")
	if n := strings.Count(logs, "path=/user/alice/builder-tools/ws "); n != 1 {
		t.Errorf("the unserved path was logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, "/user/alice/megane/builder-tools/ws") || !strings.Contains(logs, "served=\"/builder-tools/ws ") {
		t.Errorf("the log line does not name the paths served:\n%s", logs)
	}
	if strings.Contains(logs, "SECRET") {
		t.Errorf("the query was logged:\n%s", logs)
	}
	if lines != 10 {
		t.Errorf("%d lines for 51 unserved paths, want the limit of 10 a minute", lines)
	}
}

func getResp(t *testing.T, url string) *http.Response {
	t.Helper()
	c := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequestWithContext(context.Background(), "GET", url, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func get(t *testing.T, url string, status int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("GET %s: %s, want %d: %s", url, resp.Status, status, b)
	}
	return string(b)
}
