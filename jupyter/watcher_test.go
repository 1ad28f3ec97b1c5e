package jupyter

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWatcherSeesEdits edits the config while a Watcher is in use and
// checks that the next Current has the new entry with a new fingerprint,
// and that an unchanged configuration is served from the cache.
func TestWatcherSeesEdits(t *testing.T) {
	s := newSandbox(t)
	file := s.write("home/.jupyter/jupyter_server_config.json", `{"MeganeBuilderTools": {"mcp_servers": {"t": {"url": "https://a.example/mcp"}}}}`)
	w := NewWatcher(noPython(s))
	ctx := context.Background()
	c1 := w.Current(ctx)
	e1, ok := entryByName(c1, "t")
	if !ok {
		t.Fatal("entry t missing")
	}
	if c2 := w.Current(ctx); c2 != c1 {
		t.Error("an unchanged configuration was read again")
	}
	must(t, os.WriteFile(file, []byte(`{"MeganeBuilderTools": {"mcp_servers": {"t": {"url": "https://b.example/mcp"}, "u": {"url": "https://u.example/mcp"}}}}`), 0o644))
	c3 := w.Current(ctx)
	e3, _ := entryByName(c3, "t")
	if e3.URL != "https://b.example/mcp" || e3.Fingerprint == e1.Fingerprint {
		t.Errorf("after the edit: %+v (old fingerprint %s)", e3, e1.Fingerprint)
	}
	if _, ok := entryByName(c3, "u"); !ok {
		t.Error("the added entry is missing")
	}
	// A file that did not exist appears at a higher level.
	s.vars["JUPYTER_CONFIG_PATH"] = filepath.Join(s.dir, "hi")
	w = NewWatcher(noPython(s))
	w.Current(ctx)
	s.write("hi/jupyter_server_config.json", `{"MeganeBuilderTools": {"mcp_servers": {}}}`)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c := w.Current(ctx); len(c.Servers) != 1 || c.Servers[0].Name != DefaultServerName {
				t.Errorf("after a new higher file: %+v", c.Servers)
			}
		}()
	}
	wg.Wait()
}

// TestPinnedCommitEverywhere keeps every mention of the reference server's
// pinned source in README.md and etc/ equal to DefaultServerSource.
func TestPinnedCommitEverywhere(t *testing.T) {
	re := regexp.MustCompile(`megane-builder-tools@([0-9A-Za-z<>._-]*)`)
	_, want, _ := strings.Cut(DefaultServerSource, "@")
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(want) {
		t.Fatalf("DefaultServerSource must pin a full commit hash, got %q", want)
	}
	files := []string{"../README.md"}
	must(t, filepath.WalkDir("../etc", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	}))
	mentions := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			mentions++
			if m[1] != want {
				t.Errorf("%s mentions megane-builder-tools@%s; DefaultServerSource pins %s", f, m[1], want)
			}
		}
	}
	if mentions == 0 {
		t.Error("no mention found in README.md or etc/: the example config should show the pinned source")
	}
}

// TestWatcherSlowPyKeepsLastGood: a jupyter_server_config.py that sleeps
// (any process of the user can write one) does not hold up Current once it
// has a Config: after Patience it returns the last good one, with a
// problem naming the slow read, and Close ends the read under way. Before,
// every tools:servers, and every call to a connected server, waited 30 s.
func TestWatcherSlowPyKeepsLastGood(t *testing.T) {
	needJupyter(t)
	s := newSandbox(t)
	s.write("home/.jupyter/jupyter_server_config.json", `{"MeganeBuilderTools": {"mcp_servers": {"kept": {"url": "https://kept.example/mcp"}}}}`)
	w := NewWatcher(s.opts())
	w.Patience = 300 * time.Millisecond
	defer w.Close()
	if _, ok := entryByName(w.Current(context.Background()), "kept"); !ok {
		t.Fatal("the first read does not have the entry")
	}
	s.write("home/.jupyter/jupyter_server_config.py", "import time\ntime.sleep(100)\nc.MeganeBuilderTools.mcp_servers = {}\n")
	for range 2 {
		cfg := w.Current(context.Background())
		if _, ok := entryByName(cfg, "kept"); !ok {
			t.Fatalf("while the slow file is read, the last good configuration is gone: %+v", cfg.Servers)
		}
		if probs := problemsText(cfg.Problems); !strings.Contains(probs, "reading the configuration again has taken") {
			t.Fatalf("no problem names the slow read:\n%s", probs)
		}
	}
	t.Logf("abuse: time.sleep(100) in the user's jupyter_server_config.py | tools:servers waits at most Patience, then answers from the last good configuration with a problem | the last good configuration, with the problem, twice")
}
