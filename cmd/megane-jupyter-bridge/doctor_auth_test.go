package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// TestDoctorHTTPWantsCredentials: doctor --spawn against an HTTP server
// that answers 401 prints one line saying the server wants credentials and
// that the entry's "headers" key carries them, without the token (which the
// server's error body echoes).
func TestDoctorHTTPWantsCredentials(t *testing.T) {
	const secret = "s3cret-doctor-token"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="lab"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"token ` + r.Header.Get("Authorization") + ` rejected"}}`))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		headers map[string]string
		want    string
	}{
		{nil, `server lab: does not start: `},
		{map[string]string{"Authorization": "Bearer " + secret}, `lab answered 401 Unauthorized to the credentials in its entry's "headers" (Authorization): they are missing, wrong or expired; renew them there; it asks for Bearer`},
	} {
		var out bytes.Buffer
		r := &report{out: &out}
		e := bridge.ServerSpec{Name: "lab", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Headers: tc.headers}
		spawnCheck(context.Background(), r, &jupyter.Config{}, e, 10*time.Second)
		got := out.String()
		if r.warnings != 1 || r.errors != 0 || !strings.Contains(got, tc.want) || strings.Count(got, "\n") != 1 {
			t.Errorf("doctor printed %q, want one warning line with %q (a server that does not start is a warning)", got, tc.want)
		}
		if tc.headers == nil && !strings.Contains(got, `lab answered 401 Unauthorized: it wants credentials, which go in the "headers" key of its entry`) {
			t.Errorf("doctor printed %q, want the hint for an entry without headers", got)
		}
		if strings.Contains(got, secret) {
			t.Errorf("doctor printed the secret: %q", got)
		}
	}
}
