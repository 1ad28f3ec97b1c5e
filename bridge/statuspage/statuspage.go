// Package statuspage owns the bridge's status page and tool runner, and the
// page-side client module builder-tools-client.js: four static files
// (index.html, app.js, style.css, builder-tools-client.js) embedded in the
// binary and the http.Handler that serves them. The client module is what
// any page (the Builder's Tools menu, the status page's runner) uses to get
// its tool connections over the bridge. The page shows what the bridge sees (its
// version, every configured server with its state, configuration problems,
// recent errors) and runs tools, speaking only the public page protocol of
// bridge/PROTOCOL.md over the WebSocket beside it ({dir}ws).
//
// It never talks to tool servers or to the bridge's internals, never loads
// anything from outside the binary (no CDN, no fonts, no images but data:
// URIs), and never renders server data as HTML: everything a server sends is
// shown as text. Admission is the bridge's job (its Gate runs before the
// handler); the handler only serves its files.
package statuspage

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"net/url"
)

//go:embed index.html app.js style.css builder-tools-client.js
var files embed.FS

// contentSecurityPolicy allows the page's own script and style, images from
// data: URIs only (tool icons), and connections to its own origin (the
// WebSocket); nothing else, no inline script, no framing by other sites.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'"

// handler serves the embedded files. It is read-only after Handler.
type handler struct {
	tokenFirst bool               // Options.TokenFirst
	index      *template.Template // index.html; its asset URLs carry the request's token
	js         []byte
	css        []byte
	client     []byte // builder-tools-client.js
}

// Options says how the page connects.
type Options struct {
	// TokenFirst: the bridge runs without Jupyter (standalone), so a page
	// opened with ?token= sends it at once. If false, cookie first.
	TokenFirst bool
}

// Handler returns the page's handler. The bridge mounts it with the page
// prefix stripped, so it answers "/" (and "/index.html"), "/app.js",
// "/style.css" and "/builder-tools-client.js", to GET and HEAD only.
//
// In standalone mode the page is opened as .../?token=T and every request
// must carry the token, so index.html's script and style URLs repeat the
// request's token query parameter (and nothing else of the query).
//
// With opts.TokenFirst the page sends the token it was opened with on its
// first socket (standalone mode: no proxy logs the socket's query, and no
// cookie could admit it); without, it tries the browser's cookie first and
// the token only if that is refused (under jupyter-server-proxy, which
// logs a socket's query in clear).
func Handler(opts Options) http.Handler {
	read := func(name string) []byte {
		b, err := files.ReadFile(name)
		if err != nil { // embedded at build time: cannot fail
			panic(err)
		}
		return b
	}
	return &handler{
		tokenFirst: opts.TokenFirst,
		index:      template.Must(template.New("index.html").Parse(string(read("index.html")))),
		js:         read("app.js"),
		css:        read("style.css"),
		client:     read("builder-tools-client.js"),
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the status page answers GET and HEAD only", http.StatusMethodNotAllowed)
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer") // the address may carry ?token=
	hd.Set("Cache-Control", "no-store")
	switch r.URL.Path {
	case "/", "/index.html":
		var buf bytes.Buffer
		data := struct {
			Query string
			Auth  string
		}{Auth: "auto"}
		if tok := r.URL.Query().Get("token"); tok != "" {
			data.Query = "?" + url.Values{"token": {tok}}.Encode()
			if h.tokenFirst {
				data.Auth = "token"
			}
		}
		if err := h.index.Execute(&buf, data); err != nil {
			http.Error(w, "cannot render the status page", http.StatusInternalServerError)
			return
		}
		hd.Set("Content-Type", "text/html; charset=utf-8")
		w.Write(buf.Bytes())
	case "/app.js":
		hd.Set("Content-Type", "text/javascript; charset=utf-8")
		w.Write(h.js)
	case "/builder-tools-client.js":
		hd.Set("Content-Type", "text/javascript; charset=utf-8")
		w.Write(h.client)
	case "/style.css":
		hd.Set("Content-Type", "text/css; charset=utf-8")
		w.Write(h.css)
	default:
		http.NotFound(w, r)
	}
}
