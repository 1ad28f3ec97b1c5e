package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// writeRuntimeFile writes jpserver-<pid>.json in dir as jupyter_server
// does, naming the server at url.
func writeRuntimeFile(t *testing.T, dir string, pid int, url, version string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"url": url, "base_url": "/", "token": "t0ken", "password": false,
		"pid": pid, "version": version, "secure": false, "root_dir": dir})
	path := filepath.Join(dir, "jpserver-"+strconv.Itoa(pid)+".json")
	must(t, os.WriteFile(path, b, 0o600))
	return path
}

// renamePID makes the runtime file at path name process pid.
func renamePID(t *testing.T, path string, pid int) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	var m map[string]any
	must(t, json.Unmarshal(b, &m))
	m["pid"] = pid
	b, _ = json.Marshal(m)
	must(t, os.WriteFile(path, b, 0o600))
}

// ownParent finds the parent as serve does (PPID zero: this process's own
// parent) from a runtime file pointing at url.
func ownParent(t *testing.T, url, version string) (*Parent, string) {
	t.Helper()
	dir := t.TempDir()
	path := writeRuntimeFile(t, dir, os.Getppid(), url, version)
	env := map[string]string{"JUPYTER_RUNTIME_DIR": dir, "HOME": dir}
	p, err := FindParent(ParentOptions{Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Client.CloseIdleConnections)
	return p, path
}

// TestVerdictOnlyFromJupyter: whatever answers at the parent's address
// gives no verdict unless its answers are positively jupyter_server's. Any
// web server answers 404 to the 1.x kernel-channel probe, which from
// Jupyter means "may execute": here strangers answer it (and everything
// else) and the bridge must get ErrNotJupyter, never a verdict. The real
// servers' answers are asserted by the auth package's verdict tests
// (TestJupyter1Verdicts, TestJupyter2Verdicts, the Hub tests).
func TestVerdictOnlyFromJupyter(t *testing.T) {
	notFound := http.NotFoundHandler()
	strangers := []struct {
		name    string
		handler http.Handler
	}{
		{"404 to everything", notFound},
		{"Server: TornadoServer and 404 to everything", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Server", "TornadoServer/6.2")
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, "<html><title>404: Not Found</title><body>404: Not Found</body></html>")
		})},
		{"GET api as Jupyter 1.23, 404 elsewhere", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/api" {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"version": "1.23.3"}`)
				return
			}
			notFound.ServeHTTP(w, r)
		})},
		{"JSON 404 that is not Jupyter's", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error": "not found"}`)
		})},
	}
	for _, s := range strangers {
		for _, version := range []string{"1.23.3", "2.15.0"} {
			t.Run(s.name+"/runtime file says "+version, func(t *testing.T) {
				srv := httptest.NewServer(s.handler)
				defer srv.Close()
				p, _ := ownParent(t, srv.URL+"/", version)
				v, err := p.Ask(context.Background(), Credentials{Authorization: "token t0ken", Host: srv.Listener.Addr().String()})
				if !errors.Is(err, ErrNotJupyter) {
					t.Fatalf("want ErrNotJupyter, got verdict %+v, error %v", v, err)
				}
				t.Logf("refused: %v", err)
			})
		}
	}
}

// TestCheckParent: a parent found as a process counts only while it is
// still there; once it is gone the credentials are not even sent to its
// address.
func TestCheckParent(t *testing.T) {
	cases := []struct {
		name    string
		change  func(t *testing.T, p *Parent, path string)
		goneHas string // "" = still the parent
	}{
		{name: "still the parent", change: func(*testing.T, *Parent, string) {}},
		{name: "runtime file removed", goneHas: "was removed", change: func(t *testing.T, _ *Parent, path string) {
			must(t, os.Remove(path))
		}},
		{name: "runtime file names another process", goneHas: "now names process", change: func(t *testing.T, _ *Parent, path string) {
			renamePID(t, path, os.Getppid()+1)
		}},
		{name: "no longer this process's parent", goneHas: "has exited", change: func(_ *testing.T, p *Parent, _ string) {
			// As if the parent had died and this process been handed to
			// another: os.Getppid() no longer returns the pid it was found
			// with. (The program's own test kills a real parent.)
			p.pid = os.Getppid() + 1
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var asked atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				http.NotFound(w, r)
			}))
			defer srv.Close()
			p, path := ownParent(t, srv.URL+"/", "1.23.3")
			tc.change(t, p, path)
			err := p.CheckParent()
			if tc.goneHas == "" {
				if err != nil {
					t.Fatalf("CheckParent: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrParentGone) || !strings.Contains(err.Error(), tc.goneHas) {
				t.Fatalf("CheckParent = %v, want ErrParentGone saying %q", err, tc.goneHas)
			}
			if _, err := p.Ask(context.Background(), Credentials{Authorization: "token t0ken"}); !errors.Is(err, ErrParentGone) {
				t.Fatalf("Ask = %v, want ErrParentGone", err)
			}
			if n := asked.Load(); n != 0 {
				t.Fatalf("the credentials were sent to the gone parent's address %d times", n)
			}
		})
	}
	t.Run("--jupyter-url is not a process", func(t *testing.T) {
		p, err := FindParent(ParentOptions{URL: "http://127.0.0.1:1/"})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.CheckParent(); err != nil {
			t.Fatalf("CheckParent: %v", err)
		}
	})
	t.Run("stale runtime file at startup", func(t *testing.T) {
		dir := t.TempDir()
		path := writeRuntimeFile(t, dir, os.Getppid(), "http://127.0.0.1:1/", "1.23.3")
		renamePID(t, path, os.Getppid()+1)
		env := map[string]string{"JUPYTER_RUNTIME_DIR": dir, "HOME": dir}
		_, err := FindParent(ParentOptions{Getenv: func(k string) string { return env[k] }})
		if err == nil || !strings.Contains(err.Error(), "it is stale") {
			t.Fatalf("FindParent = %v, want a stale runtime file refused", err)
		}
	})
}
