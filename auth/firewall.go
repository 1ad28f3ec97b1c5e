package auth

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Redacted replaces every secret the credential firewall removes.
const Redacted = "[redacted]"

// RedactURL returns u with every query value, the fragment and any password
// replaced by Redacted, keeping the scheme, host, path and query names so
// a log line stays useful. A string that does not parse as a URL is
// replaced whole.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return Redacted
	}
	if p.User != nil {
		if _, has := p.User.Password(); has {
			p.User = url.UserPassword(p.User.Username(), Redacted)
		}
	}
	if p.RawQuery != "" {
		q := p.Query()
		parts := make([]string, 0, len(q))
		for k := range q {
			parts = append(parts, url.QueryEscape(k)+"="+Redacted)
		}
		slices.Sort(parts)
		p.RawQuery = strings.Join(parts, "&")
	}
	if p.Fragment != "" || p.RawFragment != "" {
		p.Fragment, p.RawFragment = Redacted, ""
	}
	if p.Opaque != "" {
		p.Opaque = Redacted
	}
	return p.String()
}

// secretKey reports whether an attribute or header name holds a secret.
func secretKey(k string) bool {
	k = strings.ToLower(k)
	switch k {
	case "cookie", "set-cookie", "authorization", "proxy-authorization", "x-xsrftoken", "x-csrftoken", "token", "password", "secret":
		return true
	}
	return strings.HasSuffix(k, "token") || strings.HasSuffix(k, "secret") || strings.HasSuffix(k, "password") ||
		strings.HasSuffix(k, "_key") || strings.HasSuffix(k, "cookie")
}

// inlineSecret finds credentials written inline in free text: a value of
// token=, *_token=, password=, secret= or _xsrf= (as in a query or a form),
// and the value after an Authorization scheme (token, bearer, basic). A
// value ends at a separator or a closing parenthesis, so that prose such as
// "(it carries ?token=)" keeps its shape; Jupyter's and JupyterHub's
// tokens never contain one.
var inlineSecret = regexp.MustCompile(`(?i)((?:[a-z_]*token|password|secret|_xsrf)=)[^&\s"';,()]+|(\b(?:token|bearer|basic) )[A-Za-z0-9._~+/=-]{8,}`)

// RedactText removes inline credentials from free text (see inlineSecret).
func RedactText(s string) string {
	return inlineSecret.ReplaceAllString(s, "${1}${2}"+Redacted)
}

// ReplaceAttr is a slog.HandlerOptions.ReplaceAttr that redacts secrets:
// the value of any attribute named like a credential (cookie,
// authorization, *token, *secret, *password, *_key), any http.Header value
// of such a header, the query of any *url.URL, and inline credentials in
// string values and errors.
func ReplaceAttr(_ []string, a slog.Attr) slog.Attr {
	return slog.Attr{Key: a.Key, Value: redactValue(a.Key, a.Value)}
}

func redactValue(key string, v slog.Value) slog.Value {
	if secretKey(key) && v.Kind() != slog.KindGroup {
		return slog.StringValue(Redacted)
	}
	switch v.Kind() {
	case slog.KindString:
		return slog.StringValue(RedactText(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]slog.Attr, len(attrs))
		for i, a := range attrs {
			out[i] = slog.Attr{Key: a.Key, Value: redactValue(a.Key, a.Value)}
		}
		return slog.GroupValue(out...)
	case slog.KindLogValuer:
		return redactValue(key, v.Resolve())
	case slog.KindAny:
		switch x := v.Any().(type) {
		case *url.URL:
			if x == nil {
				return v
			}
			return slog.StringValue(RedactURL(x.String()))
		case http.Header:
			h := make(http.Header, len(x))
			for k, vs := range x {
				if secretKey(k) {
					h[k] = []string{Redacted}
				} else {
					h[k] = slices.Clone(vs)
				}
			}
			return slog.AnyValue(h)
		case error:
			return slog.StringValue(RedactText(x.Error()))
		case []byte:
			return slog.StringValue(RedactText(string(x)))
		}
	}
	return v
}

// NewRedactingHandler wraps h so that every record's message and attributes
// (including those added with WithAttrs) pass through the credential
// firewall before h sees them. Use it around any handler whose options do
// not already set ReplaceAttr.
func NewRedactingHandler(h slog.Handler) slog.Handler {
	return redactingHandler{h}
}

type redactingHandler struct{ h slog.Handler }

func (r redactingHandler) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

func (r redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, RedactText(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(ReplaceAttr(nil, a))
		return true
	})
	return r.h.Handle(ctx, out)
}

func (r redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = ReplaceAttr(nil, a)
	}
	return redactingHandler{r.h.WithAttrs(red)}
}

func (r redactingHandler) WithGroup(name string) slog.Handler {
	return redactingHandler{r.h.WithGroup(name)}
}
