package jupyter

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ParentOptions says where to look for the parent Jupyter server. The zero
// value looks at the process's own environment and parent process, and the
// Parent it finds gives verdicts only while that process is still this
// one's parent (Parent.CheckParent).
type ParentOptions struct {
	// URL, if set, is the parent's base URL (--jupyter-url), for example
	// "http://127.0.0.1:8888/" or "http://127.0.0.1:8000/user/alice/". It
	// wins over everything else.
	URL string
	// HasAuth says whether the server named by URL requires credentials.
	// Only used with URL; a server found otherwise reports it itself. If
	// nil, true (the safe assumption).
	HasAuth *bool
	// Getenv reads the environment. If nil, os.Getenv.
	Getenv func(string) string
	// PPID is the parent process id whose runtime file is looked for. If
	// zero, os.Getppid(), which must then stay this process's parent for
	// verdicts to count; a PPID given here (doctor, tests) is only
	// checked against its runtime file.
	PPID int
	// Timeout bounds each request to the parent. If zero, 5s.
	Timeout time.Duration
}

// Parent is the Jupyter server the bridge runs under: where it is, how to
// reach it, and what it says about itself. Its exported fields are set by
// FindParent and never change afterwards.
type Parent struct {
	// Client reaches the parent: it never follows redirects, has a short
	// timeout, and dials the unix socket or uses JupyterHub's internal TLS
	// where the parent uses them.
	Client *http.Client
	// Base is the server's base URL, ending in "/" (scheme, host and
	// base_url). Over a unix socket its host is "localhost".
	Base *url.URL
	// HasAuth is false only when the server runs with neither token nor
	// password (then a request without credentials is still asked about).
	HasAuth bool
	// Hub is true for a JupyterHub single-user server.
	Hub bool
	// Owner is the user who owns the server: JUPYTERHUB_USER under
	// JupyterHub, else the OS user.
	Owner string
	// RootDir is the server's root_dir from its runtime file; "" when the
	// parent was not found through one.
	RootDir string
	// Source says how the parent was found, for logs and doctor:
	// "--jupyter-url", "runtime file <path>" or "JUPYTERHUB_SERVICE_URL".
	Source string

	// Set by FindParent, read by CheckParent; never change.
	runtimePath string // the runtime file the parent was found by; "" otherwise
	pid         int    // the parent's process id when found as a process (runtime file, or the JupyterHub environment); 0 for --jupyter-url
	ownParent   bool   // pid was this process's parent (ParentOptions.PPID zero) and must stay so

	mu      sync.Mutex // guards version
	version string     // jupyter_server version; "" until known
}

// ErrParentGone means the parent Jupyter server found as a process is no
// longer there: the process that started the bridge exited (the bridge now
// has another parent), or its runtime file was removed or names another
// process. Its address may now belong to anyone, so nothing it answers
// counts.
var ErrParentGone = errors.New("the parent Jupyter server is gone")

// CheckParent returns nil while the parent found as a process is still
// there, else an error wrapping ErrParentGone: when it was found from its
// runtime file, that file must still exist and name the same process; and
// when that process was this one's parent (ParentOptions.PPID zero), it
// must still be (os.Getppid; a dead parent's children are handed to
// another process). Jupyter leaves its runtime file behind when it is
// SIGKILLed, so the second check is what catches that. A parent given by
// URL (--jupyter-url) is not a process the bridge can check: nil.
func (p *Parent) CheckParent() error {
	if p.ownParent {
		if now := os.Getppid(); now != p.pid {
			return fmt.Errorf("%w: process %d, which started the bridge, has exited (the bridge's parent is now process %d)", ErrParentGone, p.pid, now)
		}
	}
	if p.runtimePath == "" {
		return nil
	}
	rf, err := readRuntimeFile(p.runtimePath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: its runtime file %s was removed", ErrParentGone, p.runtimePath)
	case err != nil:
		return fmt.Errorf("%w: %w", ErrParentGone, err)
	case rf.PID != 0 && rf.PID != p.pid:
		return fmt.Errorf("%w: its runtime file %s now names process %d, not %d", ErrParentGone, p.runtimePath, rf.PID, p.pid)
	}
	return nil
}

// runtimeFile is the part of jpserver-<pid>.json the bridge reads. It never
// reads the token's value beyond whether one is set.
type runtimeFile struct {
	URL      string          `json:"url"`
	Sock     string          `json:"sock"`
	Secure   bool            `json:"secure"`
	BaseURL  string          `json:"base_url"`
	Token    string          `json:"token"`
	Password json.RawMessage `json:"password"` // bool in 1.x and 2.x; a hash in very old servers
	Version  string          `json:"version"`
	PID      int             `json:"pid"`
	RootDir  string          `json:"root_dir"`
}

// ErrNoParent means no parent Jupyter server could be found.
var ErrNoParent = errors.New("no parent Jupyter server found")

// FindParent locates the parent Jupyter server without contacting it: an
// explicit opts.URL, else the runtime file jpserver-<ppid>.json in Jupyter's
// runtime directory, else JUPYTERHUB_SERVICE_URL (with
// JUPYTERHUB_SERVICE_PREFIX). It never looks at a request. The error wraps
// ErrNoParent when nothing applies, and says where it looked (not what to
// do: that depends on the caller). For an https parent it also reads
// JupyterHub's internal SSL files (hubTLS), and fails when they are
// unusable; for an http one it never reads them.
func FindParent(opts ParentOptions) (*Parent, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	ppid := opts.PPID
	if ppid == 0 {
		ppid = os.Getppid()
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	hub := getenv("JUPYTERHUB_SERVICE_URL") != "" || getenv("JUPYTERHUB_USER") != "" || getenv("JUPYTERHUB_API_URL") != ""
	owner := getenv("JUPYTERHUB_USER")
	if owner == "" {
		owner = OSUser()
	}
	p := &Parent{Hub: hub, Owner: owner, HasAuth: true}
	sock, err := p.locate(opts, getenv, ppid)
	if err != nil {
		return nil, err
	}
	if p.Source != "--jupyter-url" {
		p.pid, p.ownParent = ppid, opts.PPID == 0
	}
	p.Client, err = newParentClient(timeout, p.Base, sock, getenv, p.Source == "--jupyter-url")
	if err != nil {
		return nil, fmt.Errorf("parent %s (%s): %w", p.Base.Redacted(), p.Source, err)
	}
	return p, nil
}

// locate sets p.Base, p.Source and what a runtime file says (HasAuth,
// version, RootDir), and returns the unix socket to dial ("" for TCP).
func (p *Parent) locate(opts ParentOptions, getenv func(string) string, ppid int) (string, error) {
	if opts.URL != "" {
		base, err := parseBase(opts.URL, "")
		if err != nil {
			return "", fmt.Errorf("--jupyter-url: %w", err)
		}
		if opts.HasAuth != nil {
			p.HasAuth = *opts.HasAuth
		}
		p.Base, p.Source = base, "--jupyter-url"
		return "", nil
	}

	dir, err := parentRuntimeDir(getenv)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "jpserver-"+strconv.Itoa(ppid)+".json")
	rf, err := readRuntimeFile(path)
	switch {
	case err == nil:
		base, sock, err := rf.base()
		if err != nil {
			return "", fmt.Errorf("runtime file %s: %w", path, err)
		}
		if rf.PID != 0 && rf.PID != ppid {
			return "", fmt.Errorf("runtime file %s names process %d, not %d: it is stale", path, rf.PID, ppid)
		}
		p.Base, p.Source, p.runtimePath = base, "runtime file "+path, path
		p.HasAuth = rf.Token != "" || passwordSet(rf.Password)
		p.version = rf.Version
		p.RootDir = rf.RootDir
		return sock, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	}

	if su := getenv("JUPYTERHUB_SERVICE_URL"); su != "" {
		base, err := parseBase(su, getenv("JUPYTERHUB_SERVICE_PREFIX"))
		if err != nil {
			return "", fmt.Errorf("JUPYTERHUB_SERVICE_URL: %w", err)
		}
		p.Base, p.Source = base, "JUPYTERHUB_SERVICE_URL"
		return "", nil
	}
	// What to do about it is the caller's to say: it knows its flags.
	return "", fmt.Errorf("%w (no %s and no JUPYTERHUB_SERVICE_URL)", ErrNoParent, path)
}

// Version returns the parent's jupyter_server version: the one in its
// runtime file, else the answer of GET {base}api (asked once, remembered
// after the first success).
func (p *Parent) Version(ctx context.Context) (string, error) {
	p.mu.Lock()
	v := p.version
	p.mu.Unlock()
	if v != "" {
		return v, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL("api", nil).String(), nil)
	if err != nil {
		return "", err
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		return "", fmt.Errorf("ask the Jupyter server for its version: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		Version string `json:"version"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("ask the Jupyter server for its version: GET %sapi answered %s", p.Base.Path, resp.Status)
	}
	if err := decodeAnswer(resp, "GET "+p.Base.Path+"api: "+resp.Status, apiVersion, &body); err != nil {
		return "", fmt.Errorf("ask the Jupyter server for its version: %w", err)
	}
	p.mu.Lock()
	p.version = body.Version
	p.mu.Unlock()
	return body.Version, nil
}

// URL returns the URL of path (relative, without a leading "/") under the
// parent's base URL, with query q (may be nil).
func (p *Parent) URL(path string, q url.Values) *url.URL {
	u := *p.Base
	u.Path = strings.TrimSuffix(p.Base.Path, "/") + "/" + strings.TrimPrefix(path, "/")
	u.RawPath = ""
	u.RawQuery = q.Encode()
	return &u
}

// String describes the parent without any credential.
func (p *Parent) String() string {
	return p.Base.Redacted() + " (" + p.Source + ")"
}

// MajorVersion returns the major number of a version string such as
// "2.15.0", or 0 when it cannot be read.
func MajorVersion(v string) int {
	head, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(head)
	if err != nil {
		return 0
	}
	return n
}

// readRuntimeFile reads and decodes a jpserver-<pid>.json file.
func readRuntimeFile(path string) (*runtimeFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read runtime file: %w", err)
	}
	var rf runtimeFile
	if err := json.Unmarshal(data, &rf); err != nil {
		return nil, fmt.Errorf("runtime file %s: %w", path, err)
	}
	return &rf, nil
}

// base returns the base URL a runtime file describes and the unix socket
// to dial ("" for TCP).
func (rf *runtimeFile) base() (*url.URL, string, error) {
	if rf.Sock != "" {
		u := &url.URL{Scheme: "http", Host: "localhost", Path: "/"}
		if rf.BaseURL != "" {
			u.Path = "/" + strings.Trim(rf.BaseURL, "/") + "/"
			u.Path = strings.ReplaceAll(u.Path, "//", "/")
		}
		return u, rf.Sock, nil
	}
	if rf.URL == "" {
		return nil, "", errors.New("neither url nor sock is set")
	}
	u, err := parseBase(rf.URL, rf.BaseURL)
	return u, "", err
}

// parseBase parses a server URL, using prefix as the path when the URL has
// none, and makes the path end in "/". A wildcard host (empty, 0.0.0.0,
// ::) becomes the matching loopback address.
func parseBase(raw, prefix string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a credential
		}
		return nil, fmt.Errorf("parse the URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: the scheme must be http or https", shownURL(u))
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q: a base URL carries no user, query or fragment", shownURL(u))
	}
	host, port := u.Hostname(), u.Port()
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	if port != "" {
		u.Host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		u.Host = "[" + host + "]"
	} else {
		u.Host = host
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/" + strings.TrimPrefix(prefix, "/")
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	u.RawPath = ""
	return u, nil
}

// shownURL is u for an error message: its user, query and fragment, which
// may hold credentials, replaced by "…".
func shownURL(u *url.URL) string {
	c := *u
	c.User = nil
	if c.RawQuery != "" {
		c.RawQuery = "…"
	}
	if c.Fragment != "" {
		c.Fragment, c.RawFragment = "…", ""
	}
	if s := c.String(); u.User != nil {
		return strings.Replace(s, "://", "://…@", 1)
	} else {
		return s
	}
}

// passwordSet reports whether a runtime file's password field says a
// password is configured.
func passwordSet(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "false" && s != "null" && s != `""`
}

// newParentClient builds the client used for every request to the parent
// at base. For an https base it dials TLS itself (hubTLS under JupyterHub's
// internal SSL, else the system roots), so that every
// TLS failure, including an alert the server sends after the handshake,
// wraps ErrTLS. explicit says the base came from --jupyter-url (so a TLS
// failure is not JupyterHub's internal SSL refusing a direct question).
func newParentClient(timeout time.Duration, base *url.URL, sock string, getenv func(string) string, explicit bool) (*http.Client, error) {
	tr := &http.Transport{
		Proxy:               nil, // never through an HTTP proxy: the parent is local
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	d := &net.Dialer{Timeout: timeout}
	if sock != "" {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", sock)
		}
	} else {
		tr.DialContext = d.DialContext
	}
	if base.Scheme == "https" {
		hubConf, err := hubTLS(getenv, base.Hostname())
		if err != nil {
			return nil, err
		}
		conf := hubConf
		if conf == nil {
			conf = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName(base.Hostname())}
		}
		hint := ""
		if hubConf != nil && !explicit {
			hint = "; under JupyterHub internal SSL a single-user server accepts client certificates only from the Hub and its proxy: pass --jupyter-url with the Hub's public address of this server"
		}
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			// net/http dials with a context cut loose from the request, and
			// TLSHandshakeTimeout does not apply to a dialer of one's own:
			// bound the handshake here, or a parent that accepts TCP and
			// then says nothing holds a goroutine and a socket per request.
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			raw, err := tr.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			c := tls.Client(raw, conf)
			if err := c.HandshakeContext(ctx); err != nil {
				raw.Close()
				var ne net.Error
				if ctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
					return nil, err // a parent that does not answer, not a TLS failure
				}
				if alert := tlsAlert(err, raw.RemoteAddr(), hint); alert != err {
					return nil, alert
				}
				return nil, fmt.Errorf("%w: handshake with %s: %w", ErrTLS, addr, err)
			}
			return alertConn{c, hint}, nil
		}
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}, nil
}

// ErrTLS wraps a failed TLS exchange with the parent: its certificate was
// not accepted, or it refused the bridge's (under JupyterHub internal SSL a
// single-user server accepts client certificates only from the Hub and its
// proxy, so a bridge that asks it directly ends here).
var ErrTLS = errors.New("TLS with the Jupyter server failed")

// alertConn is a TLS connection whose errors from a TLS alert the server
// sent wrap ErrTLS. With TLS 1.3 the server judges the client certificate
// after the client's handshake has completed: its refusal arrives as an
// alert on the first read.
type alertConn struct {
	*tls.Conn
	hint string // appended to the error (see tlsAlert)
}

func (c alertConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	return n, tlsAlert(err, c.RemoteAddr(), c.hint)
}

func (c alertConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		if werr := tlsAlert(err, c.RemoteAddr(), c.hint); werr != err {
			return n, werr
		}
		// The server may have judged the certificate, sent its alert and
		// closed before this write (a broken pipe): the alert waits in
		// the receive buffer. Report it rather than the write's error.
		c.Conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, rerr := c.Conn.Read(make([]byte, 1))
		if aerr := tlsAlert(rerr, c.RemoteAddr(), c.hint); aerr != rerr {
			return n, aerr
		}
	}
	return n, err
}

// tlsAlert wraps err with ErrTLS when it is a TLS alert from the peer
// (crypto/tls reports those as a *net.OpError with Op "remote error"),
// followed by hint, what to do about it where that is known.
func tlsAlert(err error, addr net.Addr, hint string) error {
	var op *net.OpError
	if err == nil || !errors.As(err, &op) || op.Op != "remote error" {
		return err
	}
	return fmt.Errorf("%w: %s refused the connection with a TLS alert (%w)%s", ErrTLS, addr, err, hint)
}

// serverName is the name a certificate must carry for host: the host
// itself (for an IP literal such as 127.0.0.1, crypto/tls sends no SNI and
// matches the certificate's IP addresses; JupyterHub's internal
// certificates carry IP:127.0.0.1 and DNS:localhost), "localhost" when the
// host is empty.
func serverName(host string) string {
	if host == "" {
		return "localhost"
	}
	return host
}

// hubTLS returns the TLS configuration for reaching the parent at host
// under JupyterHub's internal SSL (JUPYTERHUB_SSL_KEYFILE,
// JUPYTERHUB_SSL_CERTFILE, JUPYTERHUB_SSL_CLIENT_CA, as the Hub sets them
// for a single-user server), or nil when none of those variables is set.
//
// The single-user server listens with the certificate in
// JUPYTERHUB_SSL_CERTFILE, signed by the Hub's internal "notebooks" CA,
// while JUPYTERHUB_SSL_CLIENT_CA holds the CAs of the clients it accepts
// (the Hub's and the proxy's), not that one. So a parent is accepted when
// it presents exactly the certificate of JUPYTERHUB_SSL_CERTFILE (only the
// server holding its key can: the bridge's parent is that server), or a
// certificate that verifies for host against the system roots plus
// JUPYTERHUB_SSL_CLIENT_CA. Nothing else is accepted. That certificate and
// its key are also presented as the client certificate.
func hubTLS(getenv func(string) string, host string) (*tls.Config, error) {
	keyFile, certFile, caFile := getenv("JUPYTERHUB_SSL_KEYFILE"), getenv("JUPYTERHUB_SSL_CERTFILE"), getenv("JUPYTERHUB_SSL_CLIENT_CA")
	if keyFile == "" && certFile == "" && caFile == "" {
		return nil, nil
	}
	var own *x509.Certificate // the parent's own certificate, nil without JUPYTERHUB_SSL_CERTFILE
	var certs []tls.Certificate
	switch {
	case certFile != "" && keyFile == "":
		return nil, errors.New("JupyterHub internal SSL: JUPYTERHUB_SSL_CERTFILE is set but JUPYTERHUB_SSL_KEYFILE is not")
	case certFile == "" && keyFile != "":
		return nil, errors.New("JupyterHub internal SSL: JUPYTERHUB_SSL_KEYFILE is set but JUPYTERHUB_SSL_CERTFILE is not")
	case certFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("JupyterHub internal SSL: JUPYTERHUB_SSL_CERTFILE %s with JUPYTERHUB_SSL_KEYFILE %s: %w", certFile, keyFile, err)
		}
		if own, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("JupyterHub internal SSL: JUPYTERHUB_SSL_CERTFILE %s: %w", certFile, err)
		}
		certs = []tls.Certificate{cert}
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("JupyterHub internal SSL: JUPYTERHUB_SSL_CLIENT_CA: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("JupyterHub internal SSL: JUPYTERHUB_SSL_CLIENT_CA %s holds no PEM certificate", caFile)
		}
	}
	name := serverName(host)
	verify := func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the server presented no certificate")
		}
		leaf := cs.PeerCertificates[0]
		now := time.Now()
		if own != nil && leaf.Equal(own) && !now.Before(own.NotBefore) && !now.After(own.NotAfter) {
			return nil
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := leaf.Verify(x509.VerifyOptions{
			DNSName:       name,
			Roots:         roots,
			Intermediates: inter,
			CurrentTime:   now,
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			return fmt.Errorf("the server presented a certificate (subject %q, issuer %q) that is neither the one in JUPYTERHUB_SSL_CERTFILE nor valid for %s under the system roots and JUPYTERHUB_SSL_CLIENT_CA: %w",
				leaf.Subject.String(), leaf.Issuer.String(), name, err)
		}
		return nil
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		ServerName:   name,
		Certificates: certs,
		// crypto/tls can only verify a chain against roots; accepting the
		// parent's own certificate by identity needs custom verification,
		// which Go runs only with InsecureSkipVerify. VerifyConnection runs
		// on every handshake, resumed ones included, and refuses whatever
		// it does not accept: nothing is accepted unverified.
		InsecureSkipVerify: true,
		VerifyConnection:   verify,
	}, nil
}

// parentDataDir is Jupyter's data directory (dataDir) for the environment
// getenv reads.
func parentDataDir(getenv func(string) string) (string, error) {
	home, err := homeOf(getenv)
	if err != nil && getenv("JUPYTER_DATA_DIR") == "" {
		return "", fmt.Errorf("find Jupyter's data directory: %w", err)
	}
	return dataDir(getenv, home), nil
}

// parentRuntimeDir is Jupyter's runtime directory (runtimeDir) for the
// environment getenv reads.
func parentRuntimeDir(getenv func(string) string) (string, error) {
	if d := getenv("JUPYTER_RUNTIME_DIR"); d != "" {
		return d, nil
	}
	d, err := parentDataDir(getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "runtime"), nil
}

// ReceiptKeyPath is where the bridge keeps its confirmation-receipt signing
// key: <Jupyter data dir>/megane-jupyter-bridge/receipt.key. getenv nil
// means os.Getenv.
func ReceiptKeyPath(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	d, err := parentDataDir(getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "megane-jupyter-bridge", "receipt.key"), nil
}

// OSUser is the name of the OS account running the process: the account
// name, else $USER, else the numeric uid. The bridge names this user in
// refusals and compares it with the owner of its parent's files.
func OSUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Getuid())
}
