package bridge

import (
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Which request paths the bridge answers.
//
// jupyter-server-proxy hands {base_url}megane/<rest> to the bridge as
// /<rest> when the registration has absolute_url false (what install
// writes), and as the whole {base_url}megane/<rest> when it is true; the
// bridge is not told which, and its base URL is /user/<name>/ (or
// /user/<name>/<server>/) under JupyterHub. So, whatever the base URL, it
// answers both forms:
//
//	socket:     /builder-tools/ws             {base}megane/builder-tools/ws
//	metrics:    /builder-tools/metrics        {base}megane/builder-tools/metrics
//	page:       /builder-tools/…              {base}megane/builder-tools/…
//	readiness:  /  {base}  {base}megane/
//
// and everything else with 404 and one log line per path (see notFound),
// so that a registration that sends other paths shows in Jupyter's log.

type routeKind int

const (
	routeNone     routeKind = iota
	routeSocket             // the WebSocket
	routePage               // the status page; prefix is stripped before its handler
	routeAddSlash           // a page prefix without its trailing slash: redirect
	routeReady              // jupyter-server-proxy's readiness probe
	routeMetrics            // the Prometheus metrics
)

// notFoundLines bounds the log lines for unserved paths: at most this many
// a minute, each path at most once while it is remembered.
const (
	notFoundLines = 10
	notFoundPaths = 256 // paths remembered; when full, the memory starts again
	notFoundShown = 200 // bytes of a path written to the log
)

// routes matches request paths. Everything but the not-found log state is
// read-only after newRoutes.
type routes struct {
	ws    [2]string // stripped, absolute
	mx    [2]string // stripped, absolute: the metrics
	page  [2]string // stripped, absolute; each ends in "/"
	ready [3]string
	log   *slog.Logger

	mu       sync.Mutex
	logged   map[string]struct{} // guarded by mu; unserved paths already logged
	window   time.Time           // guarded by mu; start of the current minute of notFoundLines
	inWindow int                 // guarded by mu; lines written in that minute
}

// newRoutes returns the routes for base, a normalized base URL ("/…/").
// Paths are matched decoded (a JupyterHub user "aé" has the base URL
// /user/a%C3%A9/, which a request's decoded path reads as /user/aé/).
func newRoutes(base string, log *slog.Logger) *routes {
	if dec, err := url.PathUnescape(base); err == nil {
		base = dec
	}
	return &routes{
		ws:     [2]string{"/builder-tools/ws", base + "megane/builder-tools/ws"},
		mx:     [2]string{"/builder-tools/metrics", base + "megane/builder-tools/metrics"},
		page:   [2]string{"/builder-tools/", base + "megane/builder-tools/"},
		ready:  [3]string{"/", base, base + "megane/"},
		log:    log,
		logged: map[string]struct{}{},
	}
}

// match says what path is and, for a page, the prefix to strip.
func (rt *routes) match(path string) (routeKind, string) {
	switch {
	case path == rt.ws[0] || path == rt.ws[1]:
		return routeSocket, ""
	case path == rt.mx[0] || path == rt.mx[1]:
		return routeMetrics, ""
	case path == rt.ready[0] || path == rt.ready[1] || path == rt.ready[2]:
		return routeReady, ""
	}
	for _, p := range rt.page {
		if strings.HasPrefix(path, p) {
			return routePage, strings.TrimSuffix(p, "/")
		}
		if path == strings.TrimSuffix(p, "/") {
			return routeAddSlash, ""
		}
	}
	return routeNone, ""
}

// notFound answers 404 and logs the path once (rate-limited), naming the
// paths the bridge serves: the sign of a registration whose path mode
// does not match what the bridge expects, or of a page at a wrong URL.
// The query is never logged (it may hold a token).
func (rt *routes) notFound(w http.ResponseWriter, r *http.Request) {
	http.NotFound(w, r)
	path := r.URL.Path
	if rt.shouldLog(path, time.Now()) {
		if len(path) > notFoundShown {
			path = path[:notFoundShown] + "…"
		}
		rt.log.Warn("path not served: check the jupyter-server-proxy registration (megane-jupyter-bridge doctor)",
			"path", path, "method", r.Method, "served", rt.ws[0]+" "+rt.ws[1]+" "+rt.page[0]+"… "+rt.page[1]+"…")
	}
}

func (rt *routes) shouldLog(path string, now time.Time) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if _, ok := rt.logged[path]; ok {
		return false
	}
	if now.Sub(rt.window) >= time.Minute {
		rt.window, rt.inWindow = now, 0
	}
	if rt.inWindow >= notFoundLines {
		return false
	}
	if len(rt.logged) >= notFoundPaths {
		clear(rt.logged)
	}
	rt.logged[path] = struct{}{}
	rt.inWindow++
	return true
}

// Paths returns the socket paths and the status page prefixes the bridge
// answers: the form jupyter-server-proxy forwards with absolute_url false
// (the prefix {base}megane stripped) first, the absolute form second.
func (b *Bridge) Paths() (ws []string, page []string) {
	return b.routes.ws[:], b.routes.page[:]
}

// ServeHTTP answers the readiness probe, the socket, the metrics and the status page,
// at the paths of Paths; anything else is 404.
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind, prefix := b.routes.match(r.URL.Path)
	switch {
	case kind == routeSocket:
		b.serveSocket(w, r)
	case kind == routeMetrics:
		b.serveMetrics(w, r)
	case kind == routePage && b.opts.Page != nil:
		if _, refusal := b.opts.Gate.Admit(r.Context(), r); refusal != nil {
			status := refusal.HTTPStatus
			if status == 0 {
				status = http.StatusForbidden
			}
			http.Error(w, refusal.Reason, status)
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		r2.URL = new(url.URL)
		*r2.URL = *r.URL
		r2.URL.Path, r2.URL.RawPath = strings.TrimPrefix(r.URL.Path, prefix), ""
		b.opts.Page.ServeHTTP(w, r2)
	case kind == routeAddSlash && b.opts.Page != nil:
		// Relative, so that it holds behind any proxy prefix.
		loc := "builder-tools/"
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		// (http.Redirect would make it absolute.)
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusFound)
	case kind == routeReady:
		// jupyter-server-proxy's readiness probe: any answer, at once, no
		// credentials needed. A person who opens the bridge's root is
		// told where the status page is (relative, as it holds behind
		// any proxy prefix); it says nothing the page itself does not.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "megane-jupyter-bridge\nThe status page and tool runner are at "+b.opts.BaseURL+"megane/builder-tools/"+
			" (in standalone mode add ?token=… as serve printed it; under Jupyter, open it through Jupyter: {base_url}megane/builder-tools/).\n")
	default:
		b.routes.notFound(w, r)
	}
}
