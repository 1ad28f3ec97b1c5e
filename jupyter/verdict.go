package jupyter

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
)

// Credentials are what a request to the bridge carried, forwarded as they
// are to the parent. Authorization already holds a ?token= rewritten as
// "token <t>". Values are secrets: never log them.
type Credentials struct {
	Cookie        string // the Cookie header, whole
	Authorization string // the Authorization header
	Host          string // the request's original Host header
	Origin        string // the request's Origin header ("" when absent)
}

// Outcome is the kind of a Verdict.
type Outcome int

const (
	// Allowed: the credentials may execute kernels.
	Allowed Outcome = iota + 1
	// Unauthenticated: Jupyter accepted no identity from the credentials.
	Unauthenticated
	// Forbidden: an identity was accepted but may not execute kernels.
	Forbidden
	// OriginRefused: Jupyter refused the request's Origin (or Host).
	OriginRefused
)

func (o Outcome) String() string {
	switch o {
	case Allowed:
		return "allowed"
	case Unauthenticated:
		return "unauthenticated"
	case Forbidden:
		return "forbidden"
	case OriginRefused:
		return "origin-refused"
	}
	return "unknown"
}

// Verdict is the parent's answer about one set of credentials.
type Verdict struct {
	Outcome Outcome
	// User is the identity Jupyter reported (2.x /api/me), or the server's
	// owner when it reports none (1.x) or an anonymous per-request one.
	// Empty unless Outcome is Allowed or Forbidden.
	User string
	// Detail says which answer led to the verdict, e.g.
	// "GET /api/me: 403"; never contains a credential.
	Detail string
}

// ErrUnexpected wraps answers the bridge cannot interpret (fail closed).
var ErrUnexpected = errors.New("unexpected answer from the Jupyter server")

// ErrNotJupyter wraps an answer that is not positively jupyter_server's:
// whatever answers at the parent's address did not answer as Jupyter does
// (another server took the port of a Jupyter server that died, a proxy's
// error page, ...). No verdict is taken from it (fail closed).
var ErrNotJupyter = errors.New("the answer is not the Jupyter server's")

// anonymousUser matches the usernames jupyter_server 2 invents per request
// for a token login (a uuid4 hex).
var anonymousUser = regexp.MustCompile(`^[0-9a-f]{32}$`)

// Ask asks the parent whether creds may execute kernels. On jupyter_server
// 2 and later: GET {base}api/me?permissions={"kernels":["execute"]}. On 1.x:
// GET {base}api for the Origin verdict, then the channels socket of a
// kernel id that does not exist (404 = allowed, 403 = not), then GET
// {base}api/status to tell "unauthenticated" from "forbidden". Every request
// carries the credentials, the original Host and Origin,
// Sec-Fetch-Mode: websocket and no_track_activity=1.
//
// A verdict counts only when every answer it rests on is positively
// jupyter_server's (identify: the status, Content-Type and body shape
// jupyter_server 1.23 and 2.x give at that point; a 404 from any other web
// server proves nothing), and, for a parent found as a process, only while
// that process is still the parent (CheckParent, before the credentials
// are sent and again after the answer).
//
// An error means no verdict (parent unreachable; gone, wrapping
// ErrParentGone; an answer that is not Jupyter's, wrapping ErrNotJupyter;
// or one it cannot interpret, wrapping ErrUnexpected): the caller must
// refuse.
func (p *Parent) Ask(ctx context.Context, creds Credentials) (Verdict, error) {
	if err := p.CheckParent(); err != nil {
		return Verdict{}, err
	}
	v, err := p.Version(ctx)
	if err != nil {
		return Verdict{}, err
	}
	var verdict Verdict
	if MajorVersion(v) >= 2 {
		verdict, err = p.askMe(ctx, creds)
	} else {
		verdict, err = p.askChannels(ctx, creds)
	}
	if err != nil {
		return Verdict{}, err
	}
	// The parent may have died while it was asked, and a stranger taken
	// its port: the answer counts only if it is still the parent now.
	if err := p.CheckParent(); err != nil {
		return Verdict{}, err
	}
	return verdict, nil
}

func (p *Parent) askMe(ctx context.Context, creds Credentials) (Verdict, error) {
	q := url.Values{"permissions": {`{"kernels":["execute"]}`}, "no_track_activity": {"1"}}
	resp, detail, err := p.get(ctx, "api/me", q, creds)
	if err != nil {
		return Verdict{}, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized:
		if err := identify(resp, detail, jsonError); err != nil {
			return Verdict{}, err
		}
		return Verdict{Outcome: Unauthenticated, Detail: detail}, nil
	case isRedirect(resp.StatusCode):
		if err := identify(resp, detail, loginRedirect); err != nil {
			return Verdict{}, err
		}
		return Verdict{Outcome: Unauthenticated, Detail: detail}, nil
	case resp.StatusCode == http.StatusNotFound:
		// API handlers answer 404 when check_origin (or check_host) fails.
		if err := identify(resp, detail, jsonError); err != nil {
			return Verdict{}, err
		}
		return Verdict{Outcome: OriginRefused, Detail: detail}, nil
	default:
		return Verdict{}, fmt.Errorf("%w: %s", ErrUnexpected, detail)
	}
	var body struct {
		Identity struct {
			Username string `json:"username"`
		} `json:"identity"`
		Permissions map[string][]string `json:"permissions"`
	}
	if err := decodeAnswer(resp, detail, apiMe, &body); err != nil {
		return Verdict{}, err
	}
	user := body.Identity.Username
	if user == "" || (!p.Hub && anonymousUser.MatchString(user)) {
		user = p.Owner
	}
	for _, a := range body.Permissions["kernels"] {
		if a == "execute" {
			return Verdict{Outcome: Allowed, User: user, Detail: detail}, nil
		}
	}
	return Verdict{Outcome: Forbidden, User: user, Detail: detail + " without kernels:execute"}, nil
}

func (p *Parent) askChannels(ctx context.Context, creds Credentials) (Verdict, error) {
	resp, detail, err := p.get(ctx, "api", nil, creds)
	if err != nil {
		return Verdict{}, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		if err := decodeAnswer(resp, detail, apiVersion, nil); err != nil {
			return Verdict{}, err
		}
	case http.StatusNotFound, http.StatusForbidden:
		if err := identify(resp, detail, jsonError); err != nil {
			return Verdict{}, err
		}
		return Verdict{Outcome: OriginRefused, Detail: detail}, nil
	default:
		return Verdict{}, fmt.Errorf("%w: %s", ErrUnexpected, detail)
	}

	id, err := freshKernelID()
	if err != nil {
		return Verdict{}, err
	}
	resp, _, err = p.get(ctx, "api/kernels/"+id+"/channels", url.Values{"no_track_activity": {"1"}}, creds)
	if err != nil {
		return Verdict{}, err
	}
	defer resp.Body.Close()
	detail = "GET api/kernels/<fresh id>/channels: " + resp.Status
	switch {
	case resp.StatusCode == http.StatusNotFound:
		// Any web server answers 404 here: only the channels handler's
		// own error page, after it authenticated and authorized the
		// request, means "may execute".
		if err := identify(resp, detail, htmlError); err != nil {
			return Verdict{}, err
		}
		return Verdict{Outcome: Allowed, User: p.Owner, Detail: detail}, nil
	case isRedirect(resp.StatusCode):
		if err := identify(resp, detail, loginRedirect); err != nil {
			return Verdict{}, err
		}
		return Verdict{Outcome: Unauthenticated, Detail: detail}, nil
	case resp.StatusCode == http.StatusUnauthorized:
		if err := identify(resp, detail, htmlError); err != nil {
			return Verdict{}, err
		}
		return Verdict{Outcome: Unauthenticated, Detail: detail}, nil
	case resp.StatusCode != http.StatusForbidden:
		return Verdict{}, fmt.Errorf("%w: %s", ErrUnexpected, detail)
	}
	if err := identify(resp, detail, htmlError); err != nil {
		return Verdict{}, err
	}

	// 403: no identity, or an identity without kernel execution.
	resp, sdetail, err := p.get(ctx, "api/status", url.Values{"no_track_activity": {"1"}}, creds)
	if err != nil {
		return Verdict{}, err
	}
	defer resp.Body.Close()
	detail += "; " + sdetail
	switch {
	case resp.StatusCode == http.StatusOK:
		if err := decodeAnswer(resp, detail, apiStatus, nil); err != nil {
			return Verdict{}, err
		}
		return Verdict{Outcome: Forbidden, User: p.Owner, Detail: detail}, nil
	case isRedirect(resp.StatusCode):
		if err := identify(resp, detail, loginRedirect); err != nil {
			return Verdict{}, err
		}
	default:
		if err := identify(resp, detail, jsonError); err != nil {
			return Verdict{}, err
		}
	}
	return Verdict{Outcome: Unauthenticated, Detail: detail}, nil
}

// shape is the form of one of jupyter_server's answers, as 1.23.3 and
// 2.15.0 send them (measured; see the tests).
type shape int

const (
	// jsonError: an API handler's error (APIHandler.write_error),
	// application/json {"message": "...", "reason": ...}.
	jsonError shape = iota + 1
	// htmlError: any other handler's error page (JupyterHandler.write_error
	// with error.html), text/html with <div class="error"> and
	// <h1>CODE : REASON</h1>. The channels handler answers its 403 and
	// 404 so, without the CSP header API handlers send.
	htmlError
	// loginRedirect: a redirect to a login page, with a Location.
	loginRedirect
	// apiVersion: GET api, {"version": "1.23.3"}.
	apiVersion
	// apiMe: GET api/me (2.x), {"identity": {"username": ...}, "permissions": {...}}.
	apiMe
	// apiStatus: GET api/status, {"started": ..., "last_activity": ..., ...}.
	apiStatus
)

// answerLimit bounds how much of an answer is read to identify it. Jupyter's
// error pages are about 3 KB; /api/me is under 1 KB.
const answerLimit = 1 << 20

// identify reads resp's body and returns nil when resp is positively
// jupyter_server's answer of the given shape, else an error wrapping
// ErrNotJupyter. Neither the Server header (TornadoServer serves more
// than Jupyter, and a proxy in front may replace it) nor the status alone
// is taken as proof. The error never quotes the body: Jupyter's error
// pages carry the request's token.
func identify(resp *http.Response, detail string, want shape) error {
	return decodeAnswer(resp, detail, want, nil)
}

// decodeAnswer is identify, and for a JSON shape also decodes the body into
// into (when not nil).
func decodeAnswer(resp *http.Response, detail string, want shape, into any) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, answerLimit))
	if err != nil {
		return fmt.Errorf("ask the Jupyter server: %s: read the answer: %w", detail, err)
	}
	if why := mismatch(resp, body, want); why != "" {
		return fmt.Errorf("%w: %s: %s (Server %q, Content-Type %q)", ErrNotJupyter, detail, why,
			resp.Header.Get("Server"), resp.Header.Get("Content-Type"))
	}
	if into != nil {
		if err := json.Unmarshal(body, into); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrUnexpected, detail, err)
		}
	}
	return nil
}

// mismatch says why an answer is not jupyter_server's of shape want, or ""
// when it is.
func mismatch(resp *http.Response, body []byte, want shape) string {
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if want == loginRedirect {
		if resp.Header.Get("Location") == "" {
			return "a redirect without a Location"
		}
		return ""
	}
	if want == htmlError {
		code := []byte("<h1>" + strconv.Itoa(resp.StatusCode) + " : ")
		if ctype != "text/html" || !bytes.Contains(body, []byte(`<div class="error">`)) || !bytes.Contains(body, code) {
			return "not Jupyter's error page"
		}
		return ""
	}
	if ctype != "application/json" {
		return "not JSON"
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return "not a JSON object"
	}
	isString := func(raw json.RawMessage) bool {
		var s string
		return json.Unmarshal(raw, &s) == nil
	}
	isObject := func(raw json.RawMessage) bool {
		var m map[string]json.RawMessage
		return json.Unmarshal(raw, &m) == nil && m != nil
	}
	switch want {
	case jsonError:
		if _, ok := obj["reason"]; !ok || !isString(obj["message"]) {
			return `not Jupyter's API error ({"message", "reason"})`
		}
	case apiVersion:
		var v string
		if json.Unmarshal(obj["version"], &v) != nil || v == "" || v[0] < '0' || v[0] > '9' {
			return `not Jupyter's GET api answer ({"version"})`
		}
	case apiMe:
		if !isObject(obj["identity"]) || !isObject(obj["permissions"]) {
			return `not Jupyter's GET api/me answer ({"identity", "permissions"})`
		}
		var id map[string]json.RawMessage
		json.Unmarshal(obj["identity"], &id)
		if !isString(id["username"]) {
			return "not Jupyter's GET api/me answer (no identity.username)"
		}
	case apiStatus:
		if !isString(obj["started"]) || !isString(obj["last_activity"]) {
			return `not Jupyter's GET api/status answer ({"started", "last_activity"})`
		}
	}
	return ""
}

// get sends one GET with the forwarded credentials and returns the response
// and a short credential-free description of the exchange.
func (p *Parent) get(ctx context.Context, path string, q url.Values, creds Credentials) (*http.Response, string, error) {
	u := p.URL(path, q)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", err
	}
	if creds.Host != "" {
		req.Host = creds.Host
	}
	if creds.Cookie != "" {
		req.Header.Set("Cookie", creds.Cookie)
	}
	if creds.Authorization != "" {
		req.Header.Set("Authorization", creds.Authorization)
	}
	if creds.Origin != "" {
		req.Header.Set("Origin", creds.Origin)
	}
	req.Header.Set("Sec-Fetch-Mode", "websocket")
	req.Header.Set("Accept", "application/json")
	desc := "GET " + u.Path
	resp, err := p.Client.Do(req)
	if err != nil {
		// The error of net/http names the URL with its query, which holds no
		// credential (the token travels in the header).
		return nil, desc, fmt.Errorf("ask the Jupyter server: %w", err)
	}
	return resp, desc + ": " + resp.Status, nil
}

func isRedirect(code int) bool { return code >= 300 && code < 400 }

// freshKernelID returns a random uuid4 that names no kernel.
func freshKernelID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("kernel probe id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}
