package auth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// hubSSLConfig is hubConfig with JupyterHub's internal SSL: the Hub, its
// proxy and the single-user servers talk TLS with certificates from the
// Hub's own CAs, and each side requires the other's client certificate.
//
// certipy 0.1.3 (Debian 13's python3-certipy), which makes those
// certificates, signs the leaf certificates without an
// AuthorityKeyIdentifier extension. Python 3.13's
// ssl.create_default_context enables VERIFY_X509_STRICT, which rejects such
// a certificate ("Missing Authority Key Identifier"), so unpatched the Hub
// cannot even reach its own proxy's API and never starts (fixed upstream in
// certipy by llnl/certipy#23). For the test only, the Hub's configuration
// (the Hub process makes every certificate, the users' included) wraps
// certipy's signing to add the extension, naming the issuing CA's key. This
// fixes the certificates; no verification is relaxed anywhere.
const hubSSLConfig = hubConfig + `
import certipy
from OpenSSL import crypto

_certipy_sign = certipy.Certipy.sign

def _sign_with_aki(self, req, issuer_cert_key, validity_period, digest="sha256", extensions=None, serial=0):
    exts = list(extensions or [])
    # certipy builds a CA's extensions with callables, AKI among them; a
    # leaf's are plain extensions, without AKI.
    if not any(callable(e) for e in exts):
        exts.append(crypto.X509Extension(b"authorityKeyIdentifier", False, b"keyid:always", issuer=issuer_cert_key[0]))
    return _certipy_sign(self, req, issuer_cert_key, validity_period, digest=digest, extensions=exts, serial=serial)

certipy.Certipy.sign = _sign_with_aki

c.JupyterHub.internal_ssl = True
c.JupyterHub.internal_certs_location = d + "/internal-ssl"
c.ConfigurableHTTPProxy.api_url = "https://127.0.0.1:%[4]d"
`

// serverEnviron is the environment of the process pid, which the bridge
// would inherit when jupyter-server-proxy starts it under that server.
// The bridge runs outside the chroot here, so the paths in it (HOME, the
// internal SSL files) are made to point into root.
func serverEnviron(t *testing.T, root string, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(data), "\x00") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch k {
		case "HOME", "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "JUPYTER_CONFIG_DIR", "XDG_DATA_HOME",
			"JUPYTERHUB_SSL_CERTFILE", "JUPYTERHUB_SSL_KEYFILE", "JUPYTERHUB_SSL_CLIENT_CA":
			if strings.HasPrefix(v, "/") {
				v = filepath.Join(root, v)
			}
		}
		env[k] = v
	}
	return env
}

// envWith returns a copy of env with the given variables changed (an empty
// value removes the variable).
func envWith(env map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}

// TestHub5InternalSSL: JupyterHub 5 with internal_ssl (c.JupyterHub.
// internal_ssl = True). The bridge gets the environment of alice's
// single-user server, as jupyter-server-proxy would start it there.
//
// That server listens with TLS and takes client certificates only from the
// Hub's and the proxy's CAs (JUPYTERHUB_SSL_CLIENT_CA), not from its own
// "notebooks" CA, which signed the only certificate the bridge has. So the
// bridge, asking it directly, now accepts the server (it presents exactly
// JUPYTERHUB_SSL_CERTFILE) but is refused by it at the TLS layer: the page
// is told so (4503, with what to do), and the bridge works once given
// --jupyter-url with the Hub's public address of the server.
func TestHub5InternalSSL(t *testing.T) {
	root := trixieRoot(t)
	h := startHub(t, root, hubSSLConfig)
	pid := h.Spawn(t, "alice")
	if pid == 0 {
		t.Fatal("the Hub reported no process id for alice's server")
	}
	env := serverEnviron(t, root, pid)
	for _, k := range []string{"JUPYTERHUB_SSL_CERTFILE", "JUPYTERHUB_SSL_KEYFILE", "JUPYTERHUB_SSL_CLIENT_CA"} {
		if _, err := os.Stat(env[k]); err != nil {
			t.Fatalf("alice's server has no usable %s: %v", k, err)
		}
	}
	if su := env["JUPYTERHUB_SERVICE_URL"]; !strings.HasPrefix(su, "https://") {
		t.Fatalf("alice's server is not on TLS: JUPYTERHUB_SERVICE_URL=%q", su)
	}

	aliceCookie := h.BrowserCookie(t, "alice")
	alice := h.Token(t, "alice", nil)
	bob := h.Token(t, "bob", nil)
	secrets := []string{aliceCookie, alice, bob, h.APIToken, h.CHPToken, env["JUPYTERHUB_API_TOKEN"], env["JPY_API_TOKEN"]}
	same := "http://" + h.HostHdr

	// topology serves the bridge with a gate asking the parent found in
	// genv (with opts, PPID = alice's server, as under jupyter-server-proxy).
	topology := func(t *testing.T, genv map[string]string, opts jupyter.ParentOptions) (*topology, *jupyter.Parent) {
		t.Helper()
		opts.Getenv = func(k string) string { return genv[k] }
		opts.PPID = pid
		parent, err := jupyter.FindParent(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(parent.Client.CloseIdleConnections)
		tp := newTopology(t, &jupyterServer{HostHdr: h.HostHdr, Parent: parent, Token: h.APIToken}, JupyterOptions{})
		tp.logs.secret(secrets...)
		return tp, parent
	}
	const tlsReason = "TLS with the Jupyter server failed; under JupyterHub internal SSL, ask your administrator to set --jupyter-url"

	t.Run("asking the parent directly", func(t *testing.T) {
		tp, parent := topology(t, env, jupyter.ParentOptions{})
		if !strings.HasPrefix(parent.Source, "runtime file ") || parent.Base.Scheme != "https" {
			t.Fatalf("parent %s: want alice's server from its runtime file, over https", parent)
		}
		// The bridge accepts the server's certificate and the server
		// refuses the bridge's: the refusal is a TLS alert from the server.
		_, err := parent.Ask(context.Background(), jupyter.Credentials{Authorization: "token " + alice, Host: h.HostHdr})
		if !errors.Is(err, jupyter.ErrTLS) || !strings.Contains(err.Error(), "refused the connection with a TLS alert") {
			t.Fatalf("asking alice's server directly: want its TLS refusal of the bridge's client certificate, got %v", err)
		}
		tp.run(t, []verdictCase{
			{name: "owner's browser cookie", via: "proxy", header: hdr("Cookie", aliceCookie, "Origin", same), code: 4503, reason: tlsReason},
			{name: "owner's token", via: "proxy", header: hdr("Authorization", "token "+alice), code: 4503, reason: tlsReason},
		})
		if logs := tp.logs.buf.String(); !strings.Contains(logs, "refused the connection with a TLS alert") || !strings.Contains(logs, "pass --jupyter-url") {
			t.Fatalf("the bridge's log does not say what happened and what to do:\n%s", logs)
		}
	})

	// Without the internal SSL files, or trusting only a CA that did not
	// sign the server's certificate, the bridge refuses the server itself.
	for _, bad := range []struct {
		name string
		env  map[string]string
		err  string
	}{
		{"no internal SSL environment", envWith(env, "JUPYTERHUB_SSL_CERTFILE", "", "JUPYTERHUB_SSL_KEYFILE", "", "JUPYTERHUB_SSL_CLIENT_CA", ""),
			"certificate signed by unknown authority"},
		{"a CA that did not sign the server's certificate", envWith(env, "JUPYTERHUB_SSL_CERTFILE", "", "JUPYTERHUB_SSL_KEYFILE", ""),
			"neither the one in JUPYTERHUB_SSL_CERTFILE nor valid for 127.0.0.1"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			tp, parent := topology(t, bad.env, jupyter.ParentOptions{})
			_, err := parent.Ask(context.Background(), jupyter.Credentials{Authorization: "token " + alice, Host: h.HostHdr})
			if !errors.Is(err, jupyter.ErrTLS) || !strings.Contains(err.Error(), bad.err) {
				t.Fatalf("want the bridge to refuse the server's certificate (%q), got %v", bad.err, err)
			}
			tp.run(t, []verdictCase{
				{name: "owner's token", via: "proxy", header: hdr("Authorization", "token "+alice), code: 4503, reason: tlsReason},
			})
		})
	}

	t.Run("--jupyter-url at the Hub's public address", func(t *testing.T) {
		tp, parent := topology(t, env, jupyter.ParentOptions{URL: h.Public + "user/alice/"})
		if parent.Source != "--jupyter-url" || !parent.Hub || parent.Owner != "alice" {
			t.Fatalf("parent %s: hub %v, owner %q", parent, parent.Hub, parent.Owner)
		}
		if v, err := parent.Version(context.Background()); err != nil || jupyter.MajorVersion(v) != 2 {
			t.Fatalf("single-user server version %q, %v", v, err)
		}
		tp.run(t, []verdictCase{
			{name: "owner's browser cookie", via: "proxy", header: hdr("Cookie", aliceCookie, "Origin", same), admitUser: "alice"},
			{name: "owner's token", via: "proxy", header: hdr("Authorization", "token "+alice), admitUser: "alice"},
			{name: "another user", via: "proxy", header: hdr("Authorization", "token "+bob), code: 4401, reason: "did not accept"},
			{name: "no credentials", via: "proxy", code: 4401, reason: "no Jupyter credentials"},
		})
	})
}
