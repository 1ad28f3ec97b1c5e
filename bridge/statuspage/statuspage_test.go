package statuspage

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"go.uber.org/goleak"
)

// TestMain lets the browser tests re-execute this test binary as a tool
// server (bridgetest.ServeFromEnv), and checks for leaked goroutines.
func TestMain(m *testing.M) {
	if bridgetest.ServeFromEnv() {
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func get(t *testing.T, h http.Handler, method, target string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestHandlerServesEmbeddedFiles(t *testing.T) {
	h := Handler(Options{})
	cases := []struct {
		target, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", `<script type="module" src="app.js">`},
		{"/index.html", "text/html; charset=utf-8", `<link rel="stylesheet" href="style.css">`},
		{"/app.js", "text/javascript; charset=utf-8", "createBridge("},
		{"/style.css", "text/css; charset=utf-8", "[hidden]"},
		{"/builder-tools-client.js", "text/javascript; charset=utf-8", "export async function connectBridge("},
	}
	for _, c := range cases {
		t.Run(c.target, func(t *testing.T) {
			r := get(t, h, http.MethodGet, c.target)
			if r.StatusCode != http.StatusOK {
				t.Fatalf("status %d", r.StatusCode)
			}
			if got := r.Header.Get("Content-Type"); got != c.contentType {
				t.Errorf("Content-Type %q, want %q", got, c.contentType)
			}
			csp := r.Header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "img-src data:", "connect-src 'self'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
				}
			}
			if r.Header.Get("Referrer-Policy") != "no-referrer" || r.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("headers %v", r.Header)
			}
			if b := body(t, r); !strings.Contains(b, c.contains) {
				t.Errorf("body lacks %q", c.contains)
			}
		})
	}
}

// TestHandlerCarriesToken: in standalone mode every request needs ?token=,
// so the page's asset URLs repeat it, escaped, and nothing else of the query.
func TestHandlerCarriesToken(t *testing.T) {
	cases := []struct {
		name, query, want, absent string
	}{
		{"plain", "?token=abc123", `src="app.js?token=abc123"`, ""},
		{"escaped", "?token=" + "a%22%3E%3Cscript%3Ex%26y", `src="app.js?token=a%22%3e%3cscript%3ex%26y"`, "<script>x"},
		{"other parameters dropped", "?token=t&evil=%3Cb%3E", `href="style.css?token=t"`, "evil"},
		{"no token", "?x=1", `src="app.js"`, "x=1"},
	}
	h := Handler(Options{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := body(t, get(t, h, http.MethodGet, "/"+c.query))
			if !strings.Contains(strings.ToLower(b), strings.ToLower(c.want)) {
				t.Errorf("page lacks %s:\n%s", c.want, b[:min(len(b), 600)])
			}
			if c.absent != "" && strings.Contains(b, c.absent) {
				t.Errorf("page contains %q", c.absent)
			}
		})
	}
}

// TestHandlerAuthFirst: a standalone bridge's page (TokenFirst) opened
// with ?token= sends the token on its first socket, so no refused cookie
// attempt is logged and audited before it; under Jupyter, or without a
// token, it tries the cookie first.
func TestHandlerAuthFirst(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tokenFirst bool
		query      string
		want       string
	}{
		{"standalone with a token", true, "?token=abc", `<meta name="megane-auth" content="token">`},
		{"standalone without a token", true, "", `<meta name="megane-auth" content="auto">`},
		{"under Jupyter", false, "?token=abc", `<meta name="megane-auth" content="auto">`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := body(t, get(t, Handler(Options{TokenFirst: tc.tokenFirst}), http.MethodGet, "/"+tc.query))
			if !strings.Contains(b, tc.want) {
				t.Errorf("page lacks %s:\n%s", tc.want, b[:min(len(b), 600)])
			}
		})
	}
}

func TestHandlerRefuses(t *testing.T) {
	h := Handler(Options{})
	cases := []struct {
		method, target string
		status         int
	}{
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodPut, "/app.js", http.StatusMethodNotAllowed},
		{http.MethodGet, "/ws", http.StatusNotFound},
		{http.MethodGet, "/statuspage.go", http.StatusNotFound},
		{http.MethodGet, "/../go.mod", http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.target, func(t *testing.T) {
			if r := get(t, h, c.method, c.target); r.StatusCode != c.status {
				t.Errorf("status %d, want %d", r.StatusCode, c.status)
			}
		})
	}
	if r := get(t, h, http.MethodHead, "/"); r.StatusCode != http.StatusOK {
		t.Errorf("HEAD: status %d", r.StatusCode)
	}
}

// TestNoHTMLSinks guards the rule that server data is rendered as text: the
// page's script uses none of the DOM's HTML parsers, and loads nothing from
// another origin.
func TestNoHTMLSinks(t *testing.T) {
	for _, name := range []string{"app.js", "index.html", "style.css", "builder-tools-client.js"} {
		b, err := files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "srcdoc", "createContextualFragment", "DOMParser"} {
			if strings.Contains(src, sink) {
				t.Errorf("%s uses %s", name, sink)
			}
		}
		if m := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/`).FindString(src); m != "" {
			t.Errorf("%s refers to an external address %q", name, m)
		}
	}
}
