package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// StandaloneOptions configures the standalone gate (serve --standalone,
// used by "make run" with no Jupyter server). The zero value refuses every
// request, because a token is required.
type StandaloneOptions struct {
	// Token every request must present as ?token= or as an
	// "Authorization: token|bearer <t>" header. If empty, every request is
	// refused with 4401 (use NewToken to make one).
	Token string
	// AllowOrigins lists extra Origin values accepted exactly as written
	// (for example "http://localhost:5173"). A request with no Origin header,
	// or whose Origin's host:port equals its Host header, is always accepted.
	AllowOrigins []string
	// AllowHosts lists extra accepted Host header values, as a host name
	// ("bridge.example") or host:port, compared case-insensitively. Loopback
	// hosts (localhost, 127.0.0.0/8, ::1) are always accepted; anything else
	// is refused to defeat DNS rebinding.
	AllowHosts []string
	// User is the name admitted requests are attributed to. If empty, the
	// OS user running the bridge.
	User string
	// Logger receives one line per refusal. If nil, nothing is logged.
	Logger *slog.Logger
}

// Standalone is a bridge.Gate that checks its own token, Origin and Host,
// without a Jupyter server. Safe for concurrent use.
type Standalone struct {
	tokenSum [sha256.Size]byte // SHA-256 of the token; compared in constant time
	hasToken bool
	origins  originPolicy
	user     string
	log      *slog.Logger
}

var _ bridge.Gate = (*Standalone)(nil)

// NewStandalone returns the standalone gate.
func NewStandalone(opts StandaloneOptions) *Standalone {
	s := &Standalone{
		tokenSum: sha256.Sum256([]byte(opts.Token)),
		hasToken: opts.Token != "",
		origins:  originPolicy{exact: opts.AllowOrigins, hosts: opts.AllowHosts},
		user:     opts.User,
		log:      opts.Logger,
	}
	if s.user == "" {
		s.user = jupyter.OSUser()
	}
	if s.log == nil {
		s.log = discardLogger()
	}
	return s
}

// NewToken returns a fresh random token (64 hex digits) for standalone mode.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Admit implements bridge.Gate.
func (s *Standalone) Admit(_ context.Context, r *http.Request) (bridge.Admission, *bridge.Refusal) {
	if ref := s.origins.checkHost(r); ref != nil {
		s.log.Info("refused", "reason", ref.Reason, "status", ref.HTTPStatus)
		return bridge.Admission{}, ref
	}
	if ref := s.origins.checkOrigin(r); ref != nil {
		s.log.Info("refused", "reason", ref.Reason, "status", ref.HTTPStatus)
		return bridge.Admission{}, ref
	}
	tok := requestToken(r)
	if tok == "" {
		ref := &bridge.Refusal{CloseCode: bridge.CloseNoCredentials, Reason: "no token: open the URL the bridge printed at start-up (it carries ?token=)"}
		s.log.Info("refused", "reason", ref.Reason, "code", ref.CloseCode)
		return bridge.Admission{}, ref
	}
	sum := sha256.Sum256([]byte(tok))
	if !s.hasToken || subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) != 1 {
		ref := &bridge.Refusal{CloseCode: bridge.CloseNoCredentials, Reason: "wrong token: open the URL the bridge printed at start-up"}
		s.log.Info("refused", "reason", ref.Reason, "code", ref.CloseCode)
		return bridge.Admission{}, ref
	}
	return bridge.Admission{User: s.user}, nil
}

// requestToken returns the token of ?token= or of an "Authorization:
// token|bearer <t>" header (the query first, as Jupyter does), or "".
func requestToken(r *http.Request) string {
	if t := r.URL.Query().Get("token"); t != "" {
		return t
	}
	return authorizationToken(r.Header.Get("Authorization"))
}

// authorizationToken extracts <t> from "token <t>" or "bearer <t>"
// (scheme case-insensitive), or returns "".
func authorizationToken(h string) string {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok {
		return ""
	}
	switch strings.ToLower(scheme) {
	case "token", "bearer":
		return strings.TrimSpace(rest)
	}
	return ""
}

// originPolicy is the Origin and Host rule shared by both gates.
type originPolicy struct {
	exact []string // Origins accepted exactly as written
	hosts []string // extra Host values (host or host:port); nil with anyHost
	// anyHost disables the Host check (the Jupyter gate: Jupyter itself
	// decides which Host names it serves, and a proxied request keeps the
	// browser's Host).
	anyHost bool
}

// checkHost refuses a Host that is neither loopback nor allowed.
func (p originPolicy) checkHost(r *http.Request) *bridge.Refusal {
	if p.anyHost {
		return nil
	}
	host := r.Host
	if host == "" {
		return &bridge.Refusal{HTTPStatus: http.StatusForbidden, Reason: "no Host header"}
	}
	if isLoopbackHost(host) {
		return nil
	}
	name := hostOnly(host)
	for _, h := range p.hosts {
		if strings.EqualFold(h, host) || strings.EqualFold(h, name) {
			return nil
		}
	}
	return &bridge.Refusal{HTTPStatus: http.StatusForbidden,
		Reason: "Host " + strconv.Quote(host) + " is not served: connect through localhost or allow the host name with --allow-host"}
}

// checkOrigin applies Jupyter's rule: no Origin, an Origin whose host:port
// equals the Host header, or an Origin allowed exactly.
func (p originPolicy) checkOrigin(r *http.Request) *bridge.Refusal {
	origin := r.Header.Get("Origin")
	if origin == "" || sameOrigin(origin, r.Host) {
		return nil
	}
	for _, o := range p.exact {
		if o == origin {
			return nil
		}
	}
	return &bridge.Refusal{HTTPStatus: http.StatusForbidden,
		Reason: "cross-origin request from " + strconv.Quote(safeOrigin(origin)) + " refused: open the page from the same address, or allow its origin"}
}

// sameOrigin reports whether origin's host:port equals host, as Jupyter's
// check_origin compares urlparse(origin).netloc with the Host header.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || host == "" {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// safeOrigin returns origin reduced to scheme://host[:port] for messages.
func safeOrigin(origin string) string {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return "(unparseable)"
	}
	return u.Scheme + "://" + u.Host
}

// hostOnly strips the port from a Host header value.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

// isLoopbackHost reports whether a Host header names this machine's
// loopback interface by name or by address. Unlike bridge.LoopbackHost (a
// tool server URL, which the bridge resolves itself) it accepts any name
// under .localhost: the header comes from a browser, and browsers resolve
// those names to loopback without asking DNS.
func isLoopbackHost(hostport string) bool {
	h := hostOnly(hostport)
	if strings.EqualFold(h, "localhost") || strings.HasSuffix(strings.ToLower(h), ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TokenEnv is the environment variable serve --standalone reads its token
// from when neither --token nor --token-file is given. Unlike a command-line
// argument, the environment of a process is readable only by its owner.
const TokenEnv = "MEGANE_BRIDGE_TOKEN"

// LoadOrCreateToken returns the standalone token kept in the file at path:
// its text without surrounding white space. If the file does not exist it
// is created with a new token (NewToken) and mode 0600, atomically as
// LoadOrCreateKey creates a key, through jupyter.CreateFile (a missing directory is made with mode
// 0700), so that a restarted bridge keeps its token; created says so.
//
// An existing file is refused, with the reason, when it is not a regular
// file (a symbolic link included), when its group or others may read or
// write it (the token lets anyone who has it run the configured tools), or
// when it holds no token.
func LoadOrCreateToken(path string) (token string, created bool, err error) {
	token, err = readTokenFile(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return token, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("create token file directory: %w", err)
	}
	fresh, err := NewToken()
	if err != nil {
		return "", false, err
	}
	if err := jupyter.CreateFile(path, []byte(fresh+"\n"), 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another bridge created it first: use its token.
			token, err = readTokenFile(path)
			return token, false, err
		}
		return "", false, fmt.Errorf("install token file: %w", err)
	}
	token, err = readTokenFile(path)
	return token, err == nil, err
}

// tokenFileLimit bounds what is read of a token file: a token is a line.
const tokenFileLimit = 4096

// readTokenFile reads and checks an existing token file. A missing file
// yields an error wrapping fs.ErrNotExist.
func readTokenFile(path string) (string, error) {
	f, err := openPrivate(path, "token file")
	if err != nil {
		var link symlinkError
		if errors.As(err, &link) {
			return "", err
		}
		return "", fmt.Errorf("open token file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("stat token file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("token file %s is not a regular file", path)
	}
	if perm, shared := sharedMode(st); shared {
		return "", fmt.Errorf("token file %s has mode %04o: its group or others may read or change it, and the token lets anyone run the configured tools (chmod 600 it)", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, tokenFileLimit+1))
	if err != nil {
		return "", fmt.Errorf("read token file %s: %w", path, err)
	}
	if len(b) > tokenFileLimit {
		return "", fmt.Errorf("token file %s is larger than %d bytes: it must hold one token", path, tokenFileLimit)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("token file %s holds no token", path)
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("token file %s holds more than one word: it must hold one token", path)
	}
	return token, nil
}
