package bridge

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// AuthWatch watches the answers of one Streamable HTTP server for 401 and
// 403, so that the failure a person sees says what to do (put credentials in
// the entry's headers) instead of go-sdk's bare status text. The zero value
// is ready; it is safe for concurrent use. It keeps the status and the
// challenge's scheme only, never a header value or a body.
type AuthWatch struct {
	mu     sync.Mutex
	status int    // guarded by mu; the latest 401 or 403, 0 after a success
	scheme string // guarded by mu; the WWW-Authenticate scheme of that answer
}

// Observe records one HTTP answer of the server.
func (w *AuthWatch) Observe(resp *http.Response) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		w.status = resp.StatusCode
		w.scheme = authScheme(resp.Header.Get("WWW-Authenticate"))
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		w.status, w.scheme = 0, ""
	}
}

// Hint is the one line for a person when the server's latest answer was
// 401 or 403, naming the server and the entry's "headers" key (headerNames
// are the names the entry sets, never their values); "" otherwise.
func (w *AuthWatch) Hint(server string, headerNames []string) string {
	w.mu.Lock()
	status, scheme := w.status, w.scheme
	w.mu.Unlock()
	if status == 0 {
		return ""
	}
	msg := fmt.Sprintf("%s answered %d %s", server, status, http.StatusText(status))
	if len(headerNames) == 0 {
		example := `"Authorization": "Bearer <token>"`
		if scheme != "" && !strings.EqualFold(scheme, "Bearer") {
			example = `"Authorization": "` + scheme + ` <credentials>"`
		}
		msg += fmt.Sprintf(`: it wants credentials, which go in the "headers" key of its entry (for example %s)`, example)
	} else {
		names := slices.Sorted(slices.Values(headerNames))
		if status == http.StatusUnauthorized {
			msg += fmt.Sprintf(` to the credentials in its entry's "headers" (%s): they are missing, wrong or expired; renew them there`, strings.Join(names, ", "))
		} else {
			msg += fmt.Sprintf(` to the credentials in its entry's "headers" (%s): they are wrong or lack the rights it needs`, strings.Join(names, ", "))
		}
	}
	if scheme != "" {
		msg += "; it asks for " + scheme
	}
	return msg
}

// authScheme returns the first challenge's scheme of a WWW-Authenticate
// header if it is a plain token of at most 32 characters, else "".
func authScheme(h string) string {
	s, _, _ := strings.Cut(strings.TrimSpace(h), " ")
	s, _, _ = strings.Cut(s, ",")
	if len(s) == 0 || len(s) > 32 {
		return ""
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return ""
		}
	}
	return s
}
