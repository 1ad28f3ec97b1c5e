// Command mdlinks checks the relative links of the repository's Markdown
// documents (make check): every link to a file of the repository names one
// that exists, and every #anchor names a heading of its document, as
// GitHub renders them. It prints one line per broken link and exits 1 if
// there is any.
//
// It owns only that check: it never follows links out of the repository
// (http, https, mailto) and never changes a document.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	problems, err := check(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mdlinks:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}

// check returns the broken links of the Markdown files git tracks under root.
func check(root string) ([]string, error) {
	out, err := exec.Command("git", "-C", root, "ls-files", "*.md", "**/*.md").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var problems []string
	anchors := map[string]map[string]bool{} // document -> its anchors
	for _, doc := range strings.Fields(string(out)) {
		f, err := os.Open(filepath.Join(root, doc))
		if err != nil {
			return nil, err
		}
		links, err := linksOf(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", doc, err)
		}
		for _, l := range links {
			if p := checkLink(root, doc, l, anchors); p != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s", doc, l.line, p))
			}
		}
	}
	return problems, nil
}

// link is one Markdown link target and the line it is on.
type link struct {
	target string
	line   int
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// linksOf returns the link targets of a Markdown document, outside code
// blocks and code spans.
func linksOf(r io.Reader) ([]link, error) {
	var out []link
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	fenced := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			out = append(out, link{m[1], n})
		}
	}
	return out, sc.Err()
}

// stripCodeSpans blanks `code spans`, whose brackets are not links.
func stripCodeSpans(s string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLink says what is wrong with l in doc, or "".
func checkLink(root, doc string, l link, anchors map[string]map[string]bool) string {
	t := l.target
	if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
		return ""
	}
	path, frag, _ := strings.Cut(t, "#")
	target := doc
	if path != "" {
		if strings.HasPrefix(path, "/") {
			target = strings.TrimPrefix(path, "/")
		} else {
			target = filepath.Join(filepath.Dir(doc), path)
		}
		if _, err := os.Stat(filepath.Join(root, target)); err != nil {
			return fmt.Sprintf("%s: %s does not exist", t, target)
		}
	}
	if frag == "" || !strings.HasSuffix(target, ".md") {
		return ""
	}
	a, ok := anchors[target]
	if !ok {
		var err error
		if a, err = headingAnchors(filepath.Join(root, target)); err != nil {
			return fmt.Sprintf("%s: %v", t, err)
		}
		anchors[target] = a
	}
	if !a[frag] {
		return fmt.Sprintf("%s: %s has no heading whose anchor is #%s", t, target, frag)
	}
	return ""
}

// headingAnchors are the anchors GitHub gives the headings of a document:
// the text lowercased, spaces to hyphens, punctuation other than hyphens
// and underscores dropped, and -1, -2, … for repeats.
func headingAnchors(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	fenced := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := Slug(text)
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out, sc.Err()
}

// Slug is GitHub's anchor for a heading's text.
func Slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
