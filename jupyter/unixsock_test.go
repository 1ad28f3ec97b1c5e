package jupyter

import (
	"context"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// TestParentOverUnixSocket: a real jupyter_server listening on a unix
// socket (ServerApp.sock, as jupyter-server-proxy deployments may run it)
// is found from its runtime file and asked for verdicts through the socket.
func TestParentOverUnixSocket(t *testing.T) {
	srv := jupytertest.Start(t, jupytertest.Spec{Sock: true})
	p, err := FindParent(ParentOptions{Getenv: srv.Getenv, PPID: srv.Cmd.Process.Pid})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Source, "runtime file ") || p.Base.String() != "http://localhost/" {
		t.Fatalf("found %s at %s, want the runtime file and http://localhost/ over the socket", p.Source, p.Base)
	}
	ctx := context.Background()
	cases := []struct {
		name  string
		creds Credentials
		want  Outcome
	}{
		{"token", Credentials{Authorization: "token " + srv.Token, Host: srv.HostHdr}, Allowed},
		{"wrong token", Credentials{Authorization: "token wrong-" + srv.Token[:8], Host: srv.HostHdr}, Unauthenticated},
		{"cookie", Credentials{Cookie: srv.LoginCookie(t), Host: srv.HostHdr}, Allowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := p.Ask(ctx, tc.creds)
			if err != nil {
				t.Fatal(err)
			}
			if v.Outcome != tc.want {
				t.Fatalf("verdict %+v, want outcome %v", v, tc.want)
			}
		})
	}
}
