package protocol_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestProtocolReference: docs/protocol.md names every error code and every
// client and server event type this package declares, so that the
// reference cannot fall behind the code.
func TestProtocolReference(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	names := declaredNames(t)
	if len(names) < 90 {
		t.Fatalf("found %d codes and event types in the package's source: the parse is wrong", len(names))
	}
	for _, n := range names {
		if !strings.Contains(string(doc), "`"+n+"`") {
			t.Errorf("docs/protocol.md does not name `%s`", n)
		}
	}
}

// declaredNames are the string values of the package's error code
// constants (Code…) and of its constants of type EventType and
// ClientEventType, read from its source.
func declaredNames(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				typ, _ := vs.Type.(*ast.Ident)
				for i, name := range vs.Names {
					isCode := strings.HasPrefix(name.Name, "Code")
					isEvent := typ != nil && (typ.Name == "EventType" || typ.Name == "ClientEventType")
					if i >= len(vs.Values) || !isCode && !isEvent {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						names = append(names, s)
					}
				}
			}
		}
	}
	return names
}
