package websearch

import (
	"fmt"
	"html"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"
)

// maxFileSize is the largest file LoadDir reads; larger files are skipped.
const maxFileSize = 1 << 20

// maxTitleLen bounds a title taken from a file's first line, in runes.
const maxTitleLen = 120

// LoadDir reads the documents of a --search-corpus directory: every .md,
// .txt, .html (or .htm) and .go file under dir, in lexical order. Files
// larger than 1 MiB, files that are not UTF-8 text, and directories whose
// name starts with a dot (.git) are skipped. A document's URL is "file://"
// and the file's absolute path; its title is the first Markdown heading,
// the HTML <title> or first <h1>, the first non-empty line of a text file,
// or for Go files and files without one, the path relative to dir. HTML is
// reduced to its text. Symbolic links are not followed.
func LoadDir(dir string) ([]Document, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("websearch: corpus dir: %w", err)
	}
	var docs []Document
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		ext := strings.ToLower(filepath.Ext(path))
		switch ext {
		case ".md", ".txt", ".html", ".htm", ".go":
		default:
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > maxFileSize {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !utf8.Valid(b) || strings.IndexByte(string(b), 0) >= 0 {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			rel = filepath.Base(path)
		}
		docs = append(docs, fileDocument(path, filepath.ToSlash(rel), ext, string(b)))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("websearch: corpus dir: %w", err)
	}
	return docs, nil
}

// fileDocument makes the Document of one file.
func fileDocument(path, rel, ext, text string) Document {
	d := Document{URL: "file://" + filepath.ToSlash(path), Body: text}
	switch ext {
	case ".md":
		d.Title = markdownTitle(text)
	case ".txt":
		d.Title = firstLine(text)
	case ".html", ".htm":
		d.Title = htmlTitle(text)
		d.Body = htmlText(text)
	}
	if d.Title == "" {
		d.Title = rel
	}
	return d
}

// markdownTitle is the first ATX heading ("# Title"), else the first
// non-empty line.
func markdownTitle(text string) string {
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			if t := strings.TrimSpace(strings.Trim(line, "#")); t != "" {
				return shorten(t)
			}
		}
	}
	return firstLine(text)
}

func firstLine(text string) string {
	for line := range strings.Lines(text) {
		if line = strings.TrimSpace(line); line != "" {
			return shorten(line)
		}
	}
	return ""
}

func shorten(s string) string {
	s = collapseSpace(s)
	if utf8.RuneCountInString(s) <= maxTitleLen {
		return s
	}
	return clip(s, 0, maxTitleLen)
}

var (
	htmlTitleRE  = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)
	htmlH1RE     = regexp.MustCompile(`(?is)<h1[^>]*>(.*?)</h1>`)
	htmlHiddenRE = regexp.MustCompile(`(?is)<(script|style|head)[^>]*>.*?</(script|style|head)>|<!--.*?-->`)
	htmlBlockRE  = regexp.MustCompile(`(?i)</?(p|div|br|li|ul|ol|h[1-6]|tr|table|section|article|pre|blockquote)\b[^>]*>`)
	htmlTagRE    = regexp.MustCompile(`(?s)<[^>]*>`)
)

// htmlTitle is the text of <title>, else of the first <h1>.
func htmlTitle(s string) string {
	for _, re := range []*regexp.Regexp{htmlTitleRE, htmlH1RE} {
		if m := re.FindStringSubmatch(s); m != nil {
			if t := shorten(html.UnescapeString(htmlTagRE.ReplaceAllString(m[1], ""))); t != "" {
				return t
			}
		}
	}
	return ""
}

// htmlText reduces an HTML page to its visible text, keeping block
// elements as paragraph breaks so that snippets come from one passage. It
// is a reduction for indexing, not an HTML parser.
func htmlText(s string) string {
	s = htmlHiddenRE.ReplaceAllString(s, " ")
	s = htmlBlockRE.ReplaceAllString(s, "\n\n")
	s = htmlTagRE.ReplaceAllString(s, " ")
	return html.UnescapeString(s)
}
