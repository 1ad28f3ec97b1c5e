package jupyter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
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
// An error means no verdict (parent unreachable, or an answer it cannot
// interpret, wrapping ErrUnexpected): the caller must refuse.
func (p *Parent) Ask(ctx context.Context, creds Credentials) (Verdict, error) {
	v, err := p.Version(ctx)
	if err != nil {
		return Verdict{}, err
	}
	if MajorVersion(v) >= 2 {
		return p.askMe(ctx, creds)
	}
	return p.askChannels(ctx, creds)
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
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized || isRedirect(resp.StatusCode):
		return Verdict{Outcome: Unauthenticated, Detail: detail}, nil
	case resp.StatusCode == http.StatusNotFound:
		// API handlers answer 404 when check_origin (or check_host) fails.
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
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return Verdict{}, fmt.Errorf("%w: %s: %v", ErrUnexpected, detail, err)
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
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusForbidden:
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
	resp.Body.Close()
	detail = "GET api/kernels/<fresh id>/channels: " + resp.Status
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return Verdict{Outcome: Allowed, User: p.Owner, Detail: detail}, nil
	case isRedirect(resp.StatusCode) || resp.StatusCode == http.StatusUnauthorized:
		return Verdict{Outcome: Unauthenticated, Detail: detail}, nil
	case resp.StatusCode != http.StatusForbidden:
		return Verdict{}, fmt.Errorf("%w: %s", ErrUnexpected, detail)
	}

	// 403: no identity, or an identity without kernel execution.
	resp, sdetail, err := p.get(ctx, "api/status", url.Values{"no_track_activity": {"1"}}, creds)
	if err != nil {
		return Verdict{}, err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return Verdict{Outcome: Forbidden, User: p.Owner, Detail: detail + "; " + sdetail}, nil
	}
	return Verdict{Outcome: Unauthenticated, Detail: detail + "; " + sdetail}, nil
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
