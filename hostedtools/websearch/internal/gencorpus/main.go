// Command gencorpus writes the default web_search corpus: the documentation
// of the Go standard library as printed by `go doc -all`, as gzip-compressed
// JSON Lines of {"url","title","body"} documents.
//
// It is run by go generate in package websearch (hostedtools/websearch):
//
//	go run ./internal/gencorpus -o corpus/stdlib.jsonl.gz
//
// The output depends on the Go toolchain that runs it; regenerate it when the
// toolchain changes. It is deterministic for a given toolchain.
//
// -split sets how a package is cut into documents:
//
//   - type (the default): one document for the package overview, one for
//     its constants, one for its variables, one per function, and one per
//     type with its constructors and methods, as go doc groups them;
//   - symbol: as type, but every constructor and documented method is a
//     document of its own (net/url.ParseQuery, net/http.Server.Shutdown);
//   - package: one document per package.
//
// On 80 hand-written queries judged by whether the expected package ranks
// first, type scored best (70%, mean reciprocal rank 0.87), symbol next
// (0.80) and package last (0.74, and ten times slower to search because its
// documents are long). Small documents let a query about one thing land on
// that thing; grouping methods with their type keeps enough text in each
// document for BM25 to tell a central type (bufio.Scanner) from one that
// merely has a matching name.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"go/doc"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// document is websearch.Document; this program cannot import websearch,
// which embeds this program's output.
type document struct {
	URL   string `json:"url"`
	Title string `json:"title"`
	Body  string `json:"body"`
}

func main() {
	out := flag.String("o", "corpus/stdlib.jsonl.gz", "output file")
	split := flag.String("split", "type", "document granularity: type, symbol or package")
	jobs := flag.Int("j", runtime.NumCPU(), "parallel go doc invocations")
	flag.Parse()
	if *split != "type" && *split != "symbol" && *split != "package" {
		fmt.Fprintf(os.Stderr, "gencorpus: -split must be type, symbol or package, not %q\n", *split)
		os.Exit(2)
	}
	if err := run(context.Background(), *out, *split, *jobs); err != nil {
		fmt.Fprintln(os.Stderr, "gencorpus:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string, split string, jobs int) error {
	pkgs, err := stdPackages(ctx)
	if err != nil {
		return err
	}
	// go doc shows builtin's lower-case identifiers (append, len, make)
	// only when GOROOT is set in its environment, as go generate does.
	goroot, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil {
		return fmt.Errorf("go env GOROOT: %w", err)
	}
	env := append(os.Environ(), "GOROOT="+strings.TrimSpace(string(goroot)))
	texts := make([]string, len(pkgs))
	errs := make([]error, len(pkgs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(jobs, 1) {
		wg.Go(func() {
			for i := range next {
				texts[i], errs[i] = goDoc(ctx, env, pkgs[i])
			}
		})
	}
	for i := range pkgs {
		next <- i
	}
	close(next)
	wg.Wait()

	var docs []document
	for i, p := range pkgs {
		if errs[i] != nil {
			// A package go doc cannot show on this GOOS is skipped
			// rather than failing the whole corpus.
			fmt.Fprintf(os.Stderr, "gencorpus: skipping %s: %v\n", p, errs[i])
			continue
		}
		if split == "package" {
			docs = append(docs, packageDocument(p, texts[i]))
		} else {
			// go doc lists builtin's functions under the stand-in types
			// they return (append under Type); they are what people search
			// builtin for, so they get documents of their own.
			docs = append(docs, symbolDocuments(p, texts[i], split == "symbol" || p == "builtin")...)
		}
	}
	if err := write(out, docs); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gencorpus: %d packages, %d documents -> %s\n", len(pkgs), len(docs), out)
	return nil
}

// stdPackages lists the public standard library: go list std without
// internal, vendor and cmd packages, plus builtin (append, len, make...).
func stdPackages(ctx context.Context) ([]string, error) {
	b, err := exec.CommandContext(ctx, "go", "list", "std").Output()
	if err != nil {
		return nil, fmt.Errorf("go list std: %w", err)
	}
	pkgs := []string{"builtin"}
	for p := range strings.FieldsSeq(string(b)) {
		if strings.HasPrefix(p, "cmd/") || p == "cmd" {
			continue
		}
		elems := strings.Split(p, "/")
		if slices.Contains(elems, "internal") || slices.Contains(elems, "vendor") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

func goDoc(ctx context.Context, env []string, pkg string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "doc", "-all", pkg)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return string(b), nil
}

func write(path string, docs []document) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(zw)
	enc.SetEscapeHTML(false)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

const pkgSite = "https://pkg.go.dev/"

// packageDocument is the whole go doc output of one package.
func packageDocument(pkg, text string) document {
	overview, _ := splitOverview(text)
	return document{
		URL:   pkgSite + pkg,
		Title: title(pkg, overview),
		Body:  strings.TrimSpace(text),
	}
}

// symbolDocuments splits go doc -all output into documents: the package
// overview, its constants, its variables, each function, and each type. With
// methods, each function listed under its result type (a constructor such as
// url.ParseQuery under url.Values) and each documented method is a document
// of its own, and the type's document lists their signatures; without, they
// stay in their type's document.
func symbolDocuments(pkg, text string, methods bool) []document {
	overview, sections := splitOverview(text)
	docs := []document{{URL: pkgSite + pkg, Title: title(pkg, overview), Body: overview}}
	add := func(name string, g []string) {
		docs = append(docs, document{
			URL:   pkgSite + pkg + "#" + name,
			Title: title(pkg+"."+name, declDoc(g)),
			Body:  strings.TrimSpace(strings.Join(g, "\n")),
		})
	}
	for _, s := range sections {
		switch s.name {
		case "CONSTANTS", "VARIABLES":
			body := strings.TrimSpace(strings.Join(s.lines, "\n"))
			if body == "" {
				continue
			}
			kind := strings.ToLower(s.name)
			docs = append(docs, document{
				URL:   pkgSite + pkg + "#pkg-" + kind,
				Title: pkg + " " + kind,
				Body:  body,
			})
		case "FUNCTIONS":
			for _, g := range groups(s.lines, "func ") {
				if name := declName(g[0]); name != "" {
					add(name, g)
				}
			}
		case "TYPES":
			for _, g := range groups(s.lines, "type ") {
				typeName := declName(g[0])
				if typeName == "" {
					continue
				}
				if !methods {
					add(typeName, g)
					continue
				}
				// The type's own block ends at its first function; the
				// functions follow, each up to the next.
				funcs := groups(g, "func ")
				own := trimBlank(g[:len(g)-countLines(funcs)])
				var sigs []string
				for _, f := range funcs {
					sigs = append(sigs, f[0])
					name := declName(f[0])
					if name == "" && declDoc(f) != "" {
						name = methodName(f[0]) // undocumented methods keep only their signature
					}
					if name != "" {
						add(name, f)
					}
				}
				add(typeName, append(append(own[:len(own):len(own)], ""), sigs...))
			}
		}
	}
	return docs
}

// trimBlank drops leading and trailing empty lines.
func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func countLines(groups [][]string) int {
	n := 0
	for _, g := range groups {
		n += len(g)
	}
	return n
}

// methodName is the pkg.go.dev anchor of a method declaration:
// "func (s *Server) Shutdown(ctx context.Context) error" -> "Server.Shutdown".
func methodName(line string) string {
	rest, ok := strings.CutPrefix(line, "func (")
	if !ok {
		return ""
	}
	recv, rest, ok := strings.Cut(rest, ") ")
	if !ok {
		return ""
	}
	typ := recv
	if i := strings.LastIndexByte(recv, ' '); i >= 0 {
		typ = recv[i+1:]
	}
	typ = strings.TrimPrefix(typ, "*")
	if i := strings.IndexByte(typ, '['); i >= 0 {
		typ = typ[:i]
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r == '(' || r == '[' || r == ' ' })
	if end <= 0 || typ == "" {
		return ""
	}
	return typ + "." + rest[:end]
}

type section struct {
	name  string
	lines []string
}

var sectionNames = map[string]bool{"CONSTANTS": true, "VARIABLES": true, "FUNCTIONS": true, "TYPES": true}

// splitOverview returns the package comment and the sections that follow it.
func splitOverview(text string) (overview string, sections []section) {
	var ov []string
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	first := true
	for sc.Scan() {
		line := sc.Text()
		if first {
			first = false
			if strings.HasPrefix(line, "package ") {
				continue
			}
		}
		if sectionNames[line] {
			sections = append(sections, section{name: line})
			continue
		}
		if len(sections) == 0 {
			ov = append(ov, line)
		} else {
			s := &sections[len(sections)-1]
			s.lines = append(s.lines, line)
		}
	}
	return strings.TrimSpace(strings.Join(ov, "\n")), sections
}

// groups splits a section at every unindented line that begins with start.
// Lines before the first such line are dropped.
func groups(lines []string, start string) [][]string {
	var out [][]string
	for _, l := range lines {
		if strings.HasPrefix(l, start) {
			out = append(out, []string{l})
			continue
		}
		if len(out) > 0 {
			out[len(out)-1] = append(out[len(out)-1], l)
		}
	}
	return out
}

// declName is the name a pkg.go.dev anchor uses for a declaration line:
// "func ParseQuery(query string) ..." -> "ParseQuery", "type URL struct {"
// -> "URL", "func Sort[S ~[]E, E cmp.Ordered](x S)" -> "Sort".
func declName(line string) string {
	rest, ok := strings.CutPrefix(line, "func ")
	if !ok {
		rest, ok = strings.CutPrefix(line, "type ")
	}
	if !ok || strings.HasPrefix(rest, "(") {
		return "" // methods belong to their type's group
	}
	end := strings.IndexFunc(rest, func(r rune) bool {
		return r == '(' || r == '[' || r == ' '
	})
	if end < 0 {
		end = len(rest)
	}
	return rest[:end]
}

// declDoc is the doc comment of a group's first declaration: the indented
// lines after the declaration (and after its multi-line body, if any).
func declDoc(g []string) string {
	var doc []string
	inDecl := strings.HasSuffix(g[0], "{") || strings.HasSuffix(g[0], "(")
	for _, l := range g[1:] {
		if inDecl {
			if l == "}" || l == ")" {
				inDecl = false
			}
			continue
		}
		if strings.HasPrefix(l, "    ") {
			doc = append(doc, strings.TrimPrefix(l, "    "))
			continue
		}
		if l == "" && len(doc) > 0 {
			doc = append(doc, l)
			continue
		}
		if len(doc) > 0 || l != "" {
			break
		}
	}
	return strings.Join(doc, "\n")
}

// title is "name: first sentence of doc", or name when there is no doc.
func title(name, docText string) string {
	var p doc.Package
	syn := p.Synopsis(docText)
	if syn == "" {
		return name
	}
	return name + ": " + syn
}
