package auth

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

func TestStandalone(t *testing.T) {
	const token = "s3cret-standalone-token"
	var logs bytes.Buffer
	g := NewStandalone(StandaloneOptions{
		Token:        token,
		AllowOrigins: []string{"http://localhost:5173"},
		AllowHosts:   []string{"devbox.internal"},
		User:         "alice",
		Logger:       slog.New(slog.NewTextHandler(&logs, nil)),
	})
	cases := []struct {
		name    string
		url     string
		host    string
		headers map[string]string
		status  int // refusal HTTP status; 0 with code 0 = admitted
		code    int
		reason  string
	}{
		{"query token", "/ws?token=" + token, "127.0.0.1:8765", nil, 0, 0, ""},
		{"token header", "/ws", "localhost:8765", map[string]string{"Authorization": "token " + token}, 0, 0, ""},
		{"bearer header", "/ws", "[::1]:8765", map[string]string{"Authorization": "Bearer " + token}, 0, 0, ""},
		{"same origin", "/ws?token=" + token, "127.0.0.1:8765", map[string]string{"Origin": "http://127.0.0.1:8765"}, 0, 0, ""},
		{"allowed origin", "/ws?token=" + token, "127.0.0.1:8765", map[string]string{"Origin": "http://localhost:5173"}, 0, 0, ""},
		{"allowed host", "/ws?token=" + token, "devbox.internal:8765", nil, 0, 0, ""},
		{"no token", "/ws", "127.0.0.1:8765", nil, 0, 4401, "no token"},
		{"wrong token", "/ws?token=nope", "127.0.0.1:8765", nil, 0, 4401, "wrong token"},
		{"token prefix", "/ws?token=" + token[:5], "127.0.0.1:8765", nil, 0, 4401, "wrong token"},
		{"unknown auth scheme", "/ws", "127.0.0.1:8765", map[string]string{"Authorization": "Basic " + token}, 0, 4401, "no token"},
		{"foreign origin", "/ws?token=" + token, "127.0.0.1:8765", map[string]string{"Origin": "http://evil.example"}, 403, 0, "cross-origin"},
		{"origin differing in port", "/ws?token=" + token, "127.0.0.1:8765", map[string]string{"Origin": "http://127.0.0.1:9999"}, 403, 0, "cross-origin"},
		{"null origin", "/ws?token=" + token, "127.0.0.1:8765", map[string]string{"Origin": "null"}, 403, 0, "cross-origin"},
		{"rebinding host", "/ws?token=" + token, "evil.example:8765", nil, 403, 0, "not served"},
		{"rebinding host with matching origin", "/ws?token=" + token, "evil.example:8765", map[string]string{"Origin": "http://evil.example:8765"}, 403, 0, "not served"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tc.url, nil)
			r.Host = tc.host
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			adm, ref := g.Admit(context.Background(), r)
			if tc.status == 0 && tc.code == 0 {
				if ref != nil {
					t.Fatalf("refused: %+v", ref)
				}
				if adm.User != "alice" {
					t.Fatalf("user %q", adm.User)
				}
				return
			}
			if ref == nil {
				t.Fatal("admitted")
			}
			if ref.HTTPStatus != tc.status || ref.CloseCode != tc.code || !strings.Contains(ref.Reason, tc.reason) {
				t.Fatalf("refusal %+v, want status %d code %d reason ~%q", ref, tc.status, tc.code, tc.reason)
			}
			if strings.Contains(ref.Reason, token) {
				t.Fatal("reason contains the token")
			}
		})
	}
	if strings.Contains(logs.String(), token) {
		t.Fatal("the token appears in the log")
	}

	t.Run("empty token refuses everything", func(t *testing.T) {
		g := NewStandalone(StandaloneOptions{})
		r := httptest.NewRequest("GET", "/ws?token=", nil)
		r.Host = "127.0.0.1:1"
		r.Header.Set("Authorization", "token ")
		if _, ref := g.Admit(context.Background(), r); ref == nil || ref.CloseCode != 4401 {
			t.Fatalf("got %+v", ref)
		}
	})
	t.Run("default user is the OS user", func(t *testing.T) {
		g := NewStandalone(StandaloneOptions{Token: "x"})
		r := httptest.NewRequest("GET", "/ws?token=x", nil)
		r.Host = "localhost"
		adm, ref := g.Admit(context.Background(), r)
		if ref != nil || adm.User == "" || adm.User != jupyter.OSUser() {
			t.Fatalf("adm %+v ref %+v", adm, ref)
		}
	})
}

func TestNewToken(t *testing.T) {
	a, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewToken()
	if len(a) != 64 || a == b {
		t.Fatalf("tokens %q %q", a, b)
	}
	_ = http.StatusOK
}

// TestLoadOrCreateToken: the token file of serve --standalone --token-file
// (make run). A missing one is created, private, and read back the same on
// the next start; one others could read or change, or one that holds no
// single token, is refused with the reason.
func TestLoadOrCreateToken(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(t *testing.T, path string) // nil: the file and its directory are missing
		want    string                          // the token; "" = any new one
		errHas  string                          // refused with this in the error
	}{
		{name: "missing: created"},
		{name: "existing, with a newline", want: "tok-0123456789", prepare: func(t *testing.T, path string) {
			writeFileMode(t, path, "tok-0123456789\n", 0o600)
		}},
		{name: "owner read-only", want: "tok-0123456789", prepare: func(t *testing.T, path string) {
			writeFileMode(t, path, "tok-0123456789", 0o400)
		}},
		{name: "readable by group", errHas: "has mode 0640: its group or others may read or change it", prepare: func(t *testing.T, path string) {
			writeFileMode(t, path, "tok-0123456789\n", 0o640)
		}},
		{name: "readable by others", errHas: "has mode 0604: its group or others may read or change it", prepare: func(t *testing.T, path string) {
			writeFileMode(t, path, "tok-0123456789\n", 0o604)
		}},
		{name: "writable by group", errHas: "has mode 0620", prepare: func(t *testing.T, path string) {
			writeFileMode(t, path, "tok-0123456789\n", 0o620)
		}},
		{name: "empty", errHas: "holds no token", prepare: func(t *testing.T, path string) {
			writeFileMode(t, path, " \n", 0o600)
		}},
		{name: "two words", errHas: "holds more than one word", prepare: func(t *testing.T, path string) {
			writeFileMode(t, path, "tok-1 tok-2\n", 0o600)
		}},
		{name: "a symbolic link", errHas: "is a symbolic link", prepare: func(t *testing.T, path string) {
			real := filepath.Join(filepath.Dir(path), "real")
			writeFileMode(t, real, "tok-0123456789\n", 0o600)
			if err := os.Symlink(real, path); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a directory", errHas: "is not a regular file", prepare: func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "data", "megane-jupyter-bridge", "standalone.token")
			if tc.prepare != nil {
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				tc.prepare(t, path)
			}
			token, created, err := LoadOrCreateToken(path)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), path) {
					t.Fatalf("got %q, %v; want an error naming %s and saying %q", token, err, path, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if created != (tc.prepare == nil) {
				t.Errorf("created = %v", created)
			}
			if tc.want != "" && token != tc.want {
				t.Errorf("token %q, want %q", token, tc.want)
			}
			if tc.prepare == nil {
				if len(token) != 64 {
					t.Errorf("new token %q is not 32 random bytes in hex", token)
				}
				for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
					if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
						t.Errorf("%s: %v, want mode %04o", p, st.Mode(), want)
					}
				}
			}
			again, created, err := LoadOrCreateToken(path)
			if err != nil || again != token || created {
				t.Errorf("second load: %q, created %v, %v; want %q from the file", again, created, err, token)
			}
		})
	}
}

// writeFileMode writes text to path with exactly mode perm.
func writeFileMode(t *testing.T, path, text string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}
