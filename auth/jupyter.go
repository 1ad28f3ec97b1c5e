package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// JupyterOptions configures the Jupyter gate. The zero value is usable.
type JupyterOptions struct {
	// AllowOrigin is the parent's ServerApp.allow_origin (jupyter.Config
	// reads it, and NotebookApp's only where notebook_shim moves it): "*"
	// accepts every Origin, any other non-empty value one Origin
	// exactly. The gate applies Jupyter's Origin rule itself as well as
	// asking Jupyter, so it must know this setting; if empty, only
	// same-origin requests (and token-authenticated ones) pass.
	AllowOrigin string
	// AllowOriginPat is ServerApp.allow_origin_pat, a regular expression
	// matched at the start of the Origin (Python's re.match). If it does not
	// compile as a Go regexp, no Origin matches it (fail closed) and the
	// problem is logged once.
	AllowOriginPat string
	// AdmitTTL is how long an "allowed" verdict is reused. If zero or more
	// than 60s, 60s.
	AdmitTTL time.Duration
	// RefuseTTL is how long a refusal is reused. If zero or more than 5s,
	// 5s. Errors (parent unreachable) are never cached.
	RefuseTTL time.Duration
	// CacheSize bounds the verdict cache. When it is full, expired entries
	// are dropped, then the entry closest to expiry. If zero, 1024.
	CacheSize int
	// RecheckInterval is how often an open socket's credentials are asked
	// about again (bypassing the cache). If zero, 60s.
	RecheckInterval time.Duration
	// Logger receives one line per verdict (user, outcome, reason; never a
	// credential). If nil, nothing is logged.
	Logger *slog.Logger
	// Now returns the current time. If nil, time.Now. For tests.
	Now func() time.Time
}

// asker is what the gate needs of the parent (a *jupyter.Parent).
type asker interface {
	Ask(ctx context.Context, creds jupyter.Credentials) (jupyter.Verdict, error)
}

// parentChecker is implemented by a parent that can say it is gone
// (*jupyter.Parent.CheckParent): a cached verdict counts only while it is
// not.
type parentChecker interface {
	CheckParent() error
}

// JupyterGate is a bridge.Gate that lets the parent Jupyter server decide:
// it forwards each upgrade request's credentials, Host and Origin to the
// parent and admits only those allowed to execute kernels. It also applies
// Jupyter's Origin rule itself. Safe for concurrent use.
type JupyterGate struct {
	parent    asker
	hasAuth   bool
	where     string // the parent's base URL, for messages
	origin    string
	originPat *regexp.Regexp // nil when unset or invalid
	admitTTL  time.Duration
	refuseTTL time.Duration
	interval  time.Duration
	log       *slog.Logger
	now       func() time.Time

	flight singleflight.Group // one question in flight per cache key
	cache  *verdictCache
}

var _ bridge.Gate = (*JupyterGate)(nil)

// NewJupyterGate returns the gate that asks parent.
func NewJupyterGate(parent *jupyter.Parent, opts JupyterOptions) *JupyterGate {
	return newJupyterGate(parent, parent.HasAuth, parent.Base.Redacted(), opts)
}

func newJupyterGate(parent asker, hasAuth bool, where string, opts JupyterOptions) *JupyterGate {
	g := &JupyterGate{
		parent:    parent,
		hasAuth:   hasAuth,
		where:     where,
		origin:    opts.AllowOrigin,
		admitTTL:  opts.AdmitTTL,
		refuseTTL: opts.RefuseTTL,
		interval:  opts.RecheckInterval,
		log:       opts.Logger,
		now:       opts.Now,
	}
	if g.log == nil {
		g.log = discardLogger()
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.admitTTL <= 0 || g.admitTTL > 60*time.Second {
		g.admitTTL = 60 * time.Second
	}
	if g.refuseTTL <= 0 || g.refuseTTL > 5*time.Second {
		g.refuseTTL = 5 * time.Second
	}
	if g.interval <= 0 {
		g.interval = 60 * time.Second
	}
	size := opts.CacheSize
	if size <= 0 {
		size = 1024
	}
	g.cache = newVerdictCache(size)
	if opts.AllowOriginPat != "" {
		re, err := regexp.Compile(`^(?:` + opts.AllowOriginPat + `)`)
		if err != nil {
			g.log.Error("allow_origin_pat does not compile as a Go regular expression; cross-origin requests are refused", "error", err)
		} else {
			g.originPat = re
		}
	}
	return g
}

// Admit implements bridge.Gate.
func (g *JupyterGate) Admit(ctx context.Context, r *http.Request) (bridge.Admission, *bridge.Refusal) {
	creds := credentialsOf(r)
	if ref := g.checkOrigin(r, creds); ref != nil {
		g.log.Info("refused", "reason", ref.Reason, "status", ref.HTTPStatus)
		return bridge.Admission{}, ref
	}
	if g.hasAuth && creds.Cookie == "" && creds.Authorization == "" {
		ref := &bridge.Refusal{CloseCode: bridge.CloseNoCredentials,
			Reason: "no Jupyter credentials: open Builder from JupyterLab (log in to Jupyter first)"}
		g.log.Info("refused", "reason", ref.Reason, "code", ref.CloseCode)
		return bridge.Admission{}, ref
	}
	v, ref := g.verdict(ctx, creds, false)
	if ref != nil {
		return bridge.Admission{}, ref
	}
	adm := bridge.Admission{
		User:            v.User,
		RecheckInterval: g.interval,
		Recheck: func(ctx context.Context) *bridge.Refusal {
			_, ref := g.verdict(ctx, creds, true)
			if ref != nil && ref.HTTPStatus != 0 {
				// An open socket cannot get an HTTP status: close it instead.
				ref = &bridge.Refusal{CloseCode: bridge.CloseForbidden, Reason: ref.Reason}
			}
			if ref != nil && ref.CloseCode == bridge.CloseNoCredentials {
				ref = &bridge.Refusal{CloseCode: bridge.CloseForbidden, Reason: "your Jupyter session ended: log in to Jupyter again and reload the page"}
			}
			return ref
		},
	}
	return adm, nil
}

// verdict returns the parent's verdict for creds, from the cache unless
// fresh, and turns a refusal or an error into a Refusal.
func (g *JupyterGate) verdict(ctx context.Context, creds jupyter.Credentials, fresh bool) (jupyter.Verdict, *bridge.Refusal) {
	if pc, isChecker := g.parent.(parentChecker); isChecker {
		// A verdict, cached or not, counts only from the parent that gave
		// it: once it is gone its address may answer for anyone.
		if err := pc.CheckParent(); err != nil {
			return jupyter.Verdict{}, g.unreachable(err)
		}
	}
	key := cacheKey(creds)
	now := g.now()
	v, ok := g.cache.get(key, now)
	if !ok || fresh {
		flightKey := string(key[:])
		if fresh {
			flightKey = "fresh:" + flightKey
		}
		// Concurrent upgrades with the same credentials share one question;
		// it must not fail for all of them because the first one's request
		// went away, so it runs without that request's cancellation (the
		// parent's client bounds it with its own timeout).
		askCtx := context.WithoutCancel(ctx)
		res, err, _ := g.flight.Do(flightKey, func() (any, error) {
			v, err := g.parent.Ask(askCtx, creds)
			if err != nil {
				return nil, err
			}
			ttl := g.refuseTTL
			if v.Outcome == jupyter.Allowed {
				ttl = g.admitTTL
			}
			now := g.now()
			g.cache.put(key, v, now, now.Add(ttl))
			return v, nil
		})
		if err != nil {
			return jupyter.Verdict{}, g.unreachable(err)
		}
		v = res.(jupyter.Verdict)
	}
	var ref *bridge.Refusal
	switch v.Outcome {
	case jupyter.Allowed:
		g.log.Info("admitted", "user", v.User, "detail", v.Detail, "cached", ok && !fresh)
		return v, nil
	case jupyter.Unauthenticated:
		ref = &bridge.Refusal{CloseCode: bridge.CloseNoCredentials,
			Reason: "Jupyter did not accept your credentials for this server: log in as a user with access to it and reload the page"}
	case jupyter.Forbidden:
		ref = &bridge.Refusal{CloseCode: bridge.CloseForbidden,
			Reason: "Jupyter says " + strconv.Quote(v.User) + " may not execute kernels here: ask the server's owner for that permission"}
	case jupyter.OriginRefused:
		ref = &bridge.Refusal{HTTPStatus: http.StatusForbidden,
			Reason: "Jupyter refused this page's origin: open JupyterLab from its own address, or allow the origin in Jupyter (ServerApp.allow_origin)"}
	default:
		ref = &bridge.Refusal{CloseCode: bridge.CloseUnavailable, Reason: "the Jupyter server gave no verdict, so the bridge refuses: see the bridge's log"}
	}
	g.log.Info("refused", "reason", ref.Reason, "code", ref.CloseCode, "status", ref.HTTPStatus, "user", v.User, "detail", v.Detail, "cached", ok && !fresh)
	return v, ref
}

// unreachable is the refusal (4503) for err, the reason no verdict was
// had, and logs it.
func (g *JupyterGate) unreachable(err error) *bridge.Refusal {
	ref := &bridge.Refusal{CloseCode: bridge.CloseUnavailable,
		Reason: "could not reach the Jupyter server to check your credentials: is it running? Reload the page to retry"}
	switch {
	case errors.Is(err, jupyter.ErrTLS):
		// Typically JupyterHub's internal SSL: the single-user
		// server takes client certificates only from the Hub and
		// its proxy, so the bridge must ask through the proxy.
		ref.Reason = "TLS with the Jupyter server failed; under JupyterHub internal SSL, ask your administrator to set --jupyter-url"
	case errors.Is(err, jupyter.ErrParentGone):
		ref.Reason = "the Jupyter server that started the bridge has stopped, so the bridge refuses: restart Jupyter and reload the page"
	case errors.Is(err, jupyter.ErrNotJupyter):
		ref.Reason = "what answers at the Jupyter server's address is not Jupyter, so the bridge refuses: see the bridge's log"
	case errors.Is(err, jupyter.ErrUnexpected):
		ref.Reason = "the Jupyter server's answer could not be interpreted, so the bridge refuses: see the bridge's log"
	}
	g.log.Warn("refused", "reason", ref.Reason, "code", ref.CloseCode, "parent", g.where, "error", err)
	return ref
}

// checkOrigin applies Jupyter's Origin rule: a request without Origin, with
// an Origin whose host:port equals its Host, one that carries a token (Jupyter
// skips the check for token-authenticated requests and then judges the
// token), or an Origin allowed by allow_origin / allow_origin_pat.
func (g *JupyterGate) checkOrigin(r *http.Request, creds jupyter.Credentials) *bridge.Refusal {
	origin := creds.Origin
	switch {
	case origin == "" || r.Host == "" || sameOrigin(origin, r.Host):
		return nil
	case creds.Authorization != "":
		return nil
	case g.origin == "*" || (g.origin != "" && g.origin == origin):
		return nil
	case g.originPat != nil && g.originPat.MatchString(origin):
		return nil
	}
	return &bridge.Refusal{HTTPStatus: http.StatusForbidden,
		Reason: "cross-origin request from " + strconv.Quote(safeOrigin(origin)) + " refused: open JupyterLab from its own address, or allow the origin in Jupyter (ServerApp.allow_origin)"}
}

// credentialsOf collects what is forwarded to the parent. A ?token= query
// parameter becomes "Authorization: token <t>" (and wins over an
// Authorization header, as in Jupyter).
func credentialsOf(r *http.Request) jupyter.Credentials {
	c := jupyter.Credentials{
		Cookie:        strings.Join(r.Header.Values("Cookie"), "; "),
		Authorization: r.Header.Get("Authorization"),
		Host:          r.Host,
		Origin:        r.Header.Get("Origin"),
	}
	if t := r.URL.Query().Get("token"); t != "" {
		c.Authorization = "token " + t
	}
	return c
}

// cacheKey hashes everything the verdict depends on.
func cacheKey(c jupyter.Credentials) [sha256.Size]byte {
	h := sha256.New()
	for _, s := range []string{c.Cookie, c.Authorization, c.Host, c.Origin} {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// verdictCache is a bounded map of verdicts with expiry. Overflow policy:
// drop expired entries, then the one expiring first.
type verdictCache struct {
	max int
	mu  sync.Mutex // guards m
	m   map[[sha256.Size]byte]cached
}

type cached struct {
	v       jupyter.Verdict
	expires time.Time
}

func newVerdictCache(max int) *verdictCache {
	return &verdictCache{max: max, m: make(map[[sha256.Size]byte]cached)}
}

func (c *verdictCache) get(k [sha256.Size]byte, now time.Time) (jupyter.Verdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return jupyter.Verdict{}, false
	}
	if !now.Before(e.expires) {
		delete(c.m, k)
		return jupyter.Verdict{}, false
	}
	return e.v, true
}

func (c *verdictCache) put(k [sha256.Size]byte, v jupyter.Verdict, now, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for key, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, key)
			}
		}
		if len(c.m) >= c.max {
			var first [sha256.Size]byte
			var at time.Time
			for key, e := range c.m {
				if at.IsZero() || e.expires.Before(at) {
					first, at = key, e.expires
				}
			}
			delete(c.m, first)
		}
	}
	c.m[k] = cached{v: v, expires: expires}
}

func (c *verdictCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
