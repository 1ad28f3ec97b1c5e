package main

import (
	"strings"
	"testing"
)

// TestRepositoryLinks: the repository's own documents have no broken
// relative link (what make check runs as a command too).
func TestRepositoryLinks(t *testing.T) {
	problems, err := check("../../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Install on a Jupyter server or a JupyterHub image": "install-on-a-jupyter-server-or-a-jupyterhub-image",
		"Linux, macOS and Windows":                          "linux-macos-and-windows",
		"Admin settings: megane_jupyter_bridge.toml":        "admin-settings-megane_jupyter_bridgetoml",
		"`tools:call`": "toolscall",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLinksOf(t *testing.T) {
	doc := "see [a](x.md#y) and `[not](a link)`\n```\n[nor](this)\n```\n[b](https://e.org) [c](d/e.png \"title\")\n"
	links, err := linksOf(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range links {
		got = append(got, l.target)
	}
	if strings.Join(got, " ") != "x.md#y https://e.org d/e.png" {
		t.Errorf("links = %q", got)
	}
}
