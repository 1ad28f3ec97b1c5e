package jupyter

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"maps"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key}
}

// issue signs a server-and-client certificate for the given IPs and DNS
// names; ca nil makes it self-signed.
func issue(t *testing.T, ca *testCA, cn string, ips []string, dns []string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     dns,
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// writePEM writes certificates (and a key, when key is non-nil) as PEM.
func writePEM(t *testing.T, path string, der [][]byte, key *ecdsa.PrivateKey) {
	t.Helper()
	var out []byte
	for _, d := range der {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d})...)
	}
	if key != nil {
		b, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: b})...)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// tlsParent is an https Jupyter server stand-in answering GET .../api,
// presenting cert and, when clientCAs is set, requiring a client
// certificate signed by one of them.
func tlsParent(t *testing.T, cert tls.Certificate, clientCAs *x509.CertPool) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/api") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"version": "2.15.0"}`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCAs != nil {
		srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		srv.TLS.ClientCAs = clientCAs
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// TestHubTLS: what the bridge accepts of an https parent under JupyterHub's
// internal SSL, as JupyterHub lays it out: the single-user server listens
// with JUPYTERHUB_SSL_CERTFILE (signed by the "notebooks" CA), and
// JUPYTERHUB_SSL_CLIENT_CA holds other CAs (the Hub's and the proxy's).
func TestHubTLS(t *testing.T) {
	dir := t.TempDir()
	notebooksCA := newTestCA(t, "notebooks-ca")
	hubCA := newTestCA(t, "hub-ca")
	own := issue(t, notebooksCA, "user-alice", []string{"127.0.0.1"}, []string{"localhost"})
	writePEM(t, filepath.Join(dir, "user-alice.crt"), own.Certificate, nil)
	writePEM(t, filepath.Join(dir, "user-alice.key"), nil, own.PrivateKey.(*ecdsa.PrivateKey))
	writePEM(t, filepath.Join(dir, "notebooks-ca_trust.crt"), [][]byte{hubCA.cert.Raw}, nil)
	writePEM(t, filepath.Join(dir, "hub-ca_trust.crt"), [][]byte{hubCA.cert.Raw}, nil)
	if err := os.WriteFile(filepath.Join(dir, "garbled.crt"), []byte("-----BEGIN CERTIFICATE-----\nnot base64\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hubEnv := map[string]string{
		"JUPYTERHUB_SSL_CERTFILE":  filepath.Join(dir, "user-alice.crt"),
		"JUPYTERHUB_SSL_KEYFILE":   filepath.Join(dir, "user-alice.key"),
		"JUPYTERHUB_SSL_CLIENT_CA": filepath.Join(dir, "notebooks-ca_trust.crt"),
	}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range hubEnv {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	hubPool := x509.NewCertPool()
	hubPool.AddCert(hubCA.cert)
	ownPool := x509.NewCertPool()
	ownPool.AddCert(notebooksCA.cert)

	cases := []struct {
		name      string
		env       map[string]string
		serve     tls.Certificate // the parent's certificate
		clientCAs *x509.CertPool  // non-nil: the parent requires a client certificate from these
		host      string          // the URL's host; "" is 127.0.0.1
		direct    bool            // found as the bridge's parent (JUPYTERHUB_SERVICE_URL), not through --jupyter-url
		ok        bool
		tlsErr    bool   // the error wraps ErrTLS
		errHas    string // a substring of the error
	}{
		{name: "parent presents exactly JUPYTERHUB_SSL_CERTFILE", env: hubEnv, serve: own, ok: true},
		{name: "parent presents exactly JUPYTERHUB_SSL_CERTFILE, reached as localhost", env: hubEnv, serve: own, host: "localhost", ok: true},
		{name: "parent presents exactly JUPYTERHUB_SSL_CERTFILE and takes the same CA's client certificates", env: hubEnv, serve: own, clientCAs: ownPool, ok: true},
		{name: "certificate from JUPYTERHUB_SSL_CLIENT_CA for the host",
			env: hubEnv, serve: issue(t, hubCA, "hub", []string{"127.0.0.1"}, nil), ok: true},
		{name: "certificate from JUPYTERHUB_SSL_CLIENT_CA for localhost, reached as localhost",
			env: hubEnv, serve: issue(t, hubCA, "hub", nil, []string{"localhost"}), host: "localhost", ok: true},
		{name: "unrelated self-signed certificate",
			env: hubEnv, serve: issue(t, nil, "user-alice", []string{"127.0.0.1"}, []string{"localhost"}), tlsErr: true, errHas: "neither the one in JUPYTERHUB_SSL_CERTFILE"},
		{name: "another certificate from the notebooks CA (another user's server)",
			env: hubEnv, serve: issue(t, notebooksCA, "user-bob", []string{"127.0.0.1"}, []string{"localhost"}), tlsErr: true, errHas: "certificate signed by unknown authority"},
		{name: "certificate from JUPYTERHUB_SSL_CLIENT_CA for another host",
			env: hubEnv, serve: issue(t, hubCA, "hub", []string{"10.9.8.7"}, []string{"hub.example"}), tlsErr: true, errHas: "certificate is valid for 10.9.8.7, not 127.0.0.1"},
		{name: "parent refuses the client certificate (internal SSL asked directly)",
			env: hubEnv, serve: own, clientCAs: hubPool, direct: true, tlsErr: true, errHas: "certificate required); under JupyterHub internal SSL a single-user server accepts client certificates only from the Hub and its proxy: pass --jupyter-url"},
		{name: "parent given with --jupyter-url refuses the client certificate: no internal-SSL advice",
			env: hubEnv, serve: own, clientCAs: hubPool, tlsErr: true, errHas: "refused the connection with a TLS alert (remote error: tls: certificate required)"},
		{name: "no SSL environment: system roots only",
			env: map[string]string{}, serve: own, tlsErr: true, errHas: "unknown authority"},
		{name: "wrong CA and a certificate that is not the parent's",
			env: with("JUPYTERHUB_SSL_CERTFILE", "", "JUPYTERHUB_SSL_KEYFILE", ""), serve: own, tlsErr: true, errHas: "unknown authority"},
		{name: "JUPYTERHUB_SSL_CERTFILE missing",
			env: with("JUPYTERHUB_SSL_CERTFILE", filepath.Join(dir, "nope.crt")), serve: own, errHas: "JUPYTERHUB_SSL_CERTFILE " + filepath.Join(dir, "nope.crt")},
		{name: "JUPYTERHUB_SSL_CERTFILE garbled",
			env: with("JUPYTERHUB_SSL_CERTFILE", filepath.Join(dir, "garbled.crt")), serve: own, errHas: "JUPYTERHUB_SSL_CERTFILE " + filepath.Join(dir, "garbled.crt")},
		{name: "JUPYTERHUB_SSL_KEYFILE without JUPYTERHUB_SSL_CERTFILE",
			env: with("JUPYTERHUB_SSL_CERTFILE", ""), serve: own, errHas: "JUPYTERHUB_SSL_KEYFILE is set but JUPYTERHUB_SSL_CERTFILE is not"},
		{name: "JUPYTERHUB_SSL_CLIENT_CA missing",
			env: with("JUPYTERHUB_SSL_CLIENT_CA", filepath.Join(dir, "nope-ca.crt")), serve: own, errHas: "JUPYTERHUB_SSL_CLIENT_CA: open " + filepath.Join(dir, "nope-ca.crt")},
		{name: "JUPYTERHUB_SSL_CLIENT_CA garbled",
			env: with("JUPYTERHUB_SSL_CLIENT_CA", filepath.Join(dir, "garbled.crt")), serve: own, errHas: "JUPYTERHUB_SSL_CLIENT_CA " + filepath.Join(dir, "garbled.crt") + " holds no PEM certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := tlsParent(t, tc.serve, tc.clientCAs)
			_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
			host := tc.host
			if host == "" {
				host = "127.0.0.1"
			}
			u := "https://" + net.JoinHostPort(host, port) + "/user/alice/"
			opts := ParentOptions{URL: u, Getenv: func(k string) string { return tc.env[k] }}
			if tc.direct {
				env := maps.Clone(tc.env)
				env["JUPYTERHUB_SERVICE_URL"], env["JUPYTER_RUNTIME_DIR"] = u, t.TempDir()
				opts = ParentOptions{Getenv: func(k string) string { return env[k] }}
			}
			p, err := FindParent(opts)
			if err == nil {
				t.Cleanup(p.Client.CloseIdleConnections)
				_, err = p.Version(context.Background())
			}
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.ok && err == nil:
				t.Fatal("accepted")
			case tc.ok:
				return
			}
			t.Logf("refused: %v", err)
			if errors.Is(err, ErrTLS) != tc.tlsErr {
				t.Errorf("errors.Is(err, ErrTLS) = %v, want %v: %v", !tc.tlsErr, tc.tlsErr, err)
			}
			if !strings.Contains(err.Error(), tc.errHas) || !tc.direct && strings.Contains(err.Error(), "accepts client certificates only from the Hub") {
				t.Errorf("error %q does not say %q", err, tc.errHas)
			}
		})
	}

	t.Run("a parent that never answers the handshake is unreachable, not a TLS failure", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		accepted := make(chan net.Conn, 1)
		go func() {
			defer close(accepted)
			if c, err := l.Accept(); err == nil {
				accepted <- c // held open, silent, until the test ends
			}
		}()
		defer func() {
			l.Close()
			for c := range accepted {
				c.Close()
			}
		}()
		p, err := FindParent(ParentOptions{URL: "https://" + l.Addr().String() + "/", Getenv: func(k string) string { return hubEnv[k] }, Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Client.CloseIdleConnections()
		_, err = p.Version(context.Background())
		t.Logf("error: %v", err)
		if err == nil || errors.Is(err, ErrTLS) {
			t.Fatalf("want an error that is not ErrTLS, got %v", err)
		}
		// The handshake gives up too: the bridge closes the connection
		// (net/http's dial outlives the request, so nothing else would).
		c, ok := <-accepted
		if !ok {
			t.Fatal("the parent saw no connection")
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.Copy(io.Discard, c) // the ClientHello, then the end
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the bridge still holds the silent parent's connection 10 s after its request failed")
		}
	})
	t.Run("refusal seen first by a write, after the parent closed", func(t *testing.T) {
		// Under load the request is written only after the parent judged
		// the client certificate, sent its alert and closed: the write
		// fails first, and the alert must still be what is reported.
		srv := tlsParent(t, own, hubPool)
		p, err := FindParent(ParentOptions{URL: srv.URL + "/user/alice/", Getenv: func(k string) string { return hubEnv[k] }})
		if err != nil {
			t.Fatal(err)
		}
		dial := p.Client.Transport.(*http.Transport).DialTLSContext
		c, err := dial(context.Background(), "tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer c.Close()
		time.Sleep(300 * time.Millisecond) // the parent refuses and closes meanwhile
		req := []byte("GET /user/alice/api HTTP/1.1\r\nHost: x\r\n\r\n")
		for i := 0; i < 20 && err == nil; i++ {
			_, err = c.Write(req)
		}
		if err == nil {
			_, err = c.Read(make([]byte, 1))
		}
		if !errors.Is(err, ErrTLS) {
			t.Fatalf("want ErrTLS, got %v", err)
		}
	})
	t.Run("no SSL environment: no configuration", func(t *testing.T) {
		conf, err := hubTLS(func(string) string { return "" }, "127.0.0.1")
		if conf != nil || err != nil {
			t.Fatalf("hubTLS = %v, %v; want nil, nil", conf, err)
		}
	})
	t.Run("plain http parent: the SSL files are not read", func(t *testing.T) {
		env := with("JUPYTERHUB_SSL_CERTFILE", filepath.Join(dir, "garbled.crt"))
		if _, err := FindParent(ParentOptions{URL: "http://127.0.0.1:8000/user/alice/", Getenv: func(k string) string { return env[k] }}); err != nil {
			t.Fatalf("--jupyter-url over http failed on the internal SSL files: %v", err)
		}
	})
}
