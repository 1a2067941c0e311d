package websearch

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzParseQuery(f *testing.F) {
	for _, seed := range []string{"", "not json", "[]", "null", `{"query":""}`, `{"query":"  go maps "}`, `{"query":5}`, `{"query":"a\u0000b"}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, args string) {
		q, err := parseQuery(args)
		if err != nil {
			if !errors.Is(err, ErrInvalidArguments) {
				t.Fatalf("parseQuery(%q) error %v does not wrap ErrInvalidArguments", args, err)
			}
			return
		}
		if q == "" || q != strings.TrimSpace(q) {
			t.Fatalf("parseQuery(%q) = %q, want a non-empty trimmed query", args, q)
		}
	})
}

func FuzzSnippet(f *testing.F) {
	f.Add("short", 0)
	f.Add(strings.Repeat("word ", 100)+"needle. "+strings.Repeat("é ", 200), 500)
	f.Fuzz(func(t *testing.T, s string, at int) {
		s = collapseSpace(s)
		at = max(0, min(at, len(s)))
		got := clip(s, at, snippetLen)
		if n := utf8.RuneCountInString(got); n > snippetLen {
			t.Fatalf("clip gave %d runes, want <= %d", n, snippetLen)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("clip(%q) = %q: cut a rune", s, got)
		}
	})
}
