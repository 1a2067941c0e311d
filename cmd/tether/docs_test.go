package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsLinks: the README links every page of docs/, and every relative
// link in the README and the docs reaches a file that exists and, with a
// #fragment, a heading of it.
func TestDocsLinks(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs pages: %v", err)
	}
	readme := readDoc(t, "../../README.md")
	for _, p := range pages {
		if !strings.Contains(readme, "](docs/"+filepath.Base(p)+")") {
			t.Errorf("the README does not link docs/%s", filepath.Base(p))
		}
	}
	for _, file := range append(pages, "../../README.md") {
		for _, m := range mdLink.FindAllStringSubmatch(readDoc(t, file), -1) {
			target, frag, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(m[1], "mailto:") {
				continue
			}
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), target)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links %s, which does not exist", filepath.Base(file), m[1])
				continue
			}
			if frag != "" && !hasHeading(readDoc(t, path), frag) {
				t.Errorf("%s links %s: %s has no such heading", filepath.Base(file), m[1], target)
			}
		}
	}
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	notInSlug = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// hasHeading says whether the Markdown doc has a heading whose anchor,
// as GitHub makes it, is frag.
func hasHeading(doc, frag string) bool {
	for _, m := range mdHeading.FindAllStringSubmatch(doc, -1) {
		slug := strings.ReplaceAll(notInSlug.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if slug == frag {
			return true
		}
	}
	return false
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
