package websearch

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeFiles creates files (slash-separated paths) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"guide.md":          "Intro line\n\n## Rotating the widget\n\nTurn the widget clockwise to tighten it.",
		"notes.txt":         "\n\n  Meeting notes  \nThe lanes drain in FIFO order.",
		"page.html":         "<html><head><title>Tea &amp; biscuits</title><style>p{color:red}</style></head><body><h1>Ignored</h1><p>Steep the tea for three minutes.</p><script>var x = 'hidden';</script></body></html>",
		"heading.htm":       "<h1 class=x>Only a <b>heading</b></h1><p>Body text.</p>",
		"code/server.go":    "// Copyright line\n\npackage server\n\n// Serve answers requests.\nfunc Serve() {}\n",
		"data.json":         `{"ignored": true}`,
		"README":            "no extension, ignored",
		"binary.txt":        "text\x00with a NUL",
		"latin1.txt":        "caf\xe9",
		".git/config.md":    "# hidden directory",
		"sub/.hidden.md":    "# a dot file in a visible directory is read",
		"sub/deep/UPPER.MD": "# Upper case extension",
		"big.txt":           strings.Repeat("x", maxFileSize+1),
		"justunder.txt":     "Just under the limit\n" + strings.Repeat("y", maxFileSize-100),
	})
	docs, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Document{
		{URL: "code/server.go", Title: "code/server.go"},
		{URL: "guide.md", Title: "Rotating the widget"},
		{URL: "heading.htm", Title: "Only a heading"},
		{URL: "justunder.txt", Title: "Just under the limit"},
		{URL: "notes.txt", Title: "Meeting notes"},
		{URL: "page.html", Title: "Tea & biscuits"},
		{URL: "sub/.hidden.md", Title: "a dot file in a visible directory is read"},
		{URL: "sub/deep/UPPER.MD", Title: "Upper case extension"},
	}
	var got []Document
	for _, d := range docs {
		got = append(got, Document{URL: d.URL, Title: d.Title})
	}
	for i := range want {
		want[i].URL = "file://" + filepath.ToSlash(filepath.Join(abs, filepath.FromSlash(want[i].URL)))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("LoadDir documents:\n got %v\nwant %v", got, want)
	}

	byTitle := make(map[string]Document)
	for _, d := range docs {
		byTitle[d.Title] = d
	}
	page := byTitle["Tea & biscuits"]
	for _, gone := range []string{"<", "color:red", "hidden"} {
		if strings.Contains(page.Body, gone) {
			t.Errorf("HTML body %q still holds %q", page.Body, gone)
		}
	}
	if !strings.Contains(page.Body, "Steep the tea for three minutes.") {
		t.Errorf("HTML body %q lost its text", page.Body)
	}

	ix := newTestIndex(t, docs)
	tests := []struct{ query, want string }{
		{"how do I tighten the widget", "guide.md"},
		{"steep tea", "page.html"},
		{"serve requests", "code/server.go"},
		{"FIFO lanes", "notes.txt"},
	}
	for _, tt := range tests {
		got := search(t, ix, tt.query, 1)
		if len(got) != 1 || !strings.HasSuffix(got[0].URL, "/"+tt.want) {
			t.Errorf("Search(%q) = %v, want %s", tt.query, urls(got), tt.want)
		}
	}
}

func TestLoadDirMissing(t *testing.T) {
	t.Parallel()
	if docs, err := LoadDir(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Errorf("LoadDir(missing) = %d documents, want an error", len(docs))
	}
}

func TestLoadDirEmpty(t *testing.T) {
	t.Parallel()
	docs, err := LoadDir(t.TempDir())
	if err != nil || len(docs) != 0 {
		t.Errorf("LoadDir(empty) = %v, %v; want no documents and no error", docs, err)
	}
}
