package auth

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	cases := []struct{ in, want string }{
		{"http://127.0.0.1:8888/api/me?token=abc123&x=1", "http://127.0.0.1:8888/api/me?token=[redacted]&x=[redacted]"},
		{"/builder-tools/ws?token=abc123", "/builder-tools/ws?token=[redacted]"},
		{"http://user:pw@host/p", "http://user:[redacted]@host/p"},
		{"http://host/p#access_token=x", "http://host/p#[redacted]"},
		{"http://host/plain", "http://host/plain"},
		{"%zz", Redacted},
	}
	for _, tc := range cases {
		got := RedactURL(tc.in)
		if strings.NewReplacer("%5B", "[", "%5D", "]").Replace(got) != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "abc123") || strings.Contains(got, "pw@") {
			t.Errorf("RedactURL(%q) kept a secret: %q", tc.in, got)
		}
	}
}

func TestRedactText(t *testing.T) {
	cases := []struct{ in, want string }{
		{"GET /ws?token=abc123def&x=1", "GET /ws?token=[redacted]&x=1"},
		{"Authorization: token abcdef123456", "Authorization: token [redacted]"},
		{"password=hunter22 later", "password=[redacted] later"},
		{"(see ?token=abc123def)", "(see ?token=[redacted])"},
		// Prose about tokens keeps its shape.
		{"no token: open the URL the bridge printed at start-up (it carries ?token=)", "no token: open the URL the bridge printed at start-up (it carries ?token=)"},
	}
	for _, tc := range cases {
		if got := RedactText(tc.in); got != tc.want {
			t.Errorf("RedactText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRedactingLogger(t *testing.T) {
	const tok, cookieVal = "tok-5ecret-value-1234", "2|1:0|10:17|cookie-5ecret"
	var buf bytes.Buffer
	log := slog.New(NewRedactingHandler(slog.NewJSONHandler(&buf, nil))).With("authorization", "token "+tok)
	u, _ := url.Parse("http://h/ws?token=" + tok)
	log.Info("GET /ws?token="+tok+" Authorization: token "+tok,
		"url", u,
		"headers", http.Header{"Cookie": {"username-h=" + cookieVal}, "Authorization": {"Bearer " + tok}, "Origin": {"http://h"}},
		"cookie", "username-h="+cookieVal,
		"JUPYTERHUB_API_TOKEN", tok,
		"err", errors.New("Get \"http://h/api?token="+tok+"\": refused"),
		slog.Group("req", "Authorization", "token "+tok, "path", "/ws"),
		"raw", "password="+tok,
	)
	out := buf.String()
	for _, s := range []string{tok, cookieVal, "cookie-5ecret"} {
		if strings.Contains(out, s) {
			t.Fatalf("log kept %q:\n%s", s, out)
		}
	}
	for _, keep := range []string{`"Origin":["http://h"]`, `"path":"/ws"`, "http://h/ws?token="} {
		if !strings.Contains(out, keep) {
			t.Fatalf("log lost %q:\n%s", keep, out)
		}
	}

	var buf2 bytes.Buffer
	slog.New(slog.NewTextHandler(&buf2, &slog.HandlerOptions{ReplaceAttr: ReplaceAttr})).Info("x", "token", tok, "q", "a?token="+tok)
	if strings.Contains(buf2.String(), tok) {
		t.Fatalf("ReplaceAttr kept the token: %s", buf2.String())
	}
}

func FuzzRedactURL(f *testing.F) {
	f.Add("http://h/ws?token=secret-value")
	f.Add("/p?a=1&token=secret-value#frag")
	f.Add("http://u:secret-value@h/")
	f.Fuzz(func(t *testing.T, s string) {
		out := RedactURL(s)
		u, err := url.Parse(s)
		if err != nil {
			if out != Redacted {
				t.Fatalf("RedactURL(%q) = %q, want %q for what does not parse", s, out, Redacted)
			}
			return
		}
		o, err := url.Parse(out)
		if err != nil {
			t.Fatalf("RedactURL(%q) = %q does not parse: %v", s, out, err)
		}
		// Every query value is replaced; the keys stay.
		in := u.Query()
		for k, vs := range o.Query() {
			if _, ok := in[k]; !ok {
				t.Fatalf("RedactURL(%q) = %q has key %q the input had not", s, out, k)
			}
			for _, v := range vs {
				if v != Redacted {
					t.Fatalf("RedactURL(%q) = %q keeps query value %q", s, out, v)
				}
			}
		}
		if p, has := o.User.Password(); has && p != Redacted {
			t.Fatalf("RedactURL(%q) = %q keeps password %q", s, out, p)
		}
		if o.Fragment != "" && o.Fragment != Redacted {
			t.Fatalf("RedactURL(%q) = %q keeps fragment %q", s, out, o.Fragment)
		}
		// Outside the query, no query value appears unless the input had
		// the same characters where they are kept.
		o.RawQuery, o.ForceQuery = "", false
		rest := o.String()
		for _, vs := range in {
			for _, v := range vs {
				if len(v) >= 6 && strings.Contains(rest, v) && !strings.Contains(u.Path, v) && !strings.Contains(u.EscapedPath(), v) &&
					!strings.Contains(u.Host, v) && !strings.Contains(u.User.String(), v) {
					t.Fatalf("RedactURL(%q) = %q keeps query value %q", s, out, v)
				}
			}
		}
	})
}
