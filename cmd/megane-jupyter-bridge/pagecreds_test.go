package main

// What jupyter-server-proxy's log shows of a page's credentials when the
// page uses the client module (builder-tools-client.js) as the Builder does.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// needNode22 is Node >= 22 (a global WebSocket) from .ci/node; missing, the
// test fails under CI and is skipped otherwise.
func needNode22(t *testing.T) string {
	t.Helper()
	node, err := filepath.Abs(filepath.Join("..", "..", ".ci", "node", "node_modules", "node", "bin", "node"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, "--version").Output()
	major := 0
	if m := regexp.MustCompile(`^v(\d+)\.`).FindSubmatch(out); m != nil {
		major, _ = strconv.Atoi(string(m[1]))
	}
	if err == nil && major < 22 {
		err = fmt.Errorf("%s is %s", node, out)
	}
	if err != nil {
		jupytertest.Need(t, "Node >= 22 in .ci/node (npm ci --prefix .ci/node)", err)
	}
	return node
}

// pageModuleScript imports the client module (the bridge serves this file)
// and opens a bridge object with a token, as a page that has
// one does; the browser's cookie and Origin go with the socket (a browser
// adds them itself; Node's WebSocket takes them as headers).
const pageModuleScript = `
const env = process.env;
const headers = { Cookie: env.COOKIE, Origin: env.ORIGIN };
const mod = await import(env.MODULE);
class BrowserWebSocket extends WebSocket {
  constructor(url, protocols) {
    super(url, { protocols, headers });
    const q = new URL(url).search ? 'with a query' : 'without a query';
    this.addEventListener('open', () => console.error('socket ' + q + ': open'));
    this.addEventListener('close', (e) => console.error('socket ' + q + ': closed ' + e.code));
  }
}
// Node ends a script whose only pending work is a promise (exit 13):
// keep it alive, and give up after a minute.
const watchdog = setTimeout(() => { console.error('no answer within 60 s'); process.exit(2); }, 60000);
const b = await mod.connectBridge(env.WS_URL, { token: env.TOKEN, WebSocket: BrowserWebSocket, backoff: { attempts: 1 } });
console.log(JSON.stringify({ by: b.authenticatedBy, user: b.user }));
await b.close();
clearTimeout(watchdog);
`

// pageModule runs pageModuleScript against the Jupyter server at public
// (".../user/alice/") and returns how the module authenticated and as whom.
func pageModule(t *testing.T, node, public, cookie, origin, token string) (by, user string) {
	t.Helper()
	script := filepath.Join(t.TempDir(), "page.mjs")
	if err := os.WriteFile(script, []byte(pageModuleScript), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	module, err := filepath.Abs(filepath.Join("..", "..", "bridge", "statuspage", "builder-tools-client.js"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "COOKIE="+cookie, "ORIGIN="+origin, "TOKEN="+token,
		"MODULE="+module,
		"WS_URL=ws"+public[len("http"):]+"megane/builder-tools/ws")
	out, err := cmd.Output()
	var res struct{ By, User string }
	if err != nil || json.Unmarshal(out, &res) != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			out = append(out, ee.Stderr...)
		}
		t.Fatalf("the page's client module: %v\n%s", err, out)
	}
	return res.By, res.User
}
