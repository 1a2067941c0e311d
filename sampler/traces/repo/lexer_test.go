package calc

import (
	"strings"
	"testing"
)

func kinds(toks []Token) []Kind {
	out := make([]Kind, len(toks))
	for i, t := range toks {
		out[i] = t.Kind
	}
	return out
}

func TestLexerKinds(t *testing.T) {
	tests := []struct {
		src  string
		want []Kind
	}{
		{"", []Kind{EOF}},
		{"1 + 2", []Kind{Number, Plus, Number, EOF}},
		{"x = 3.5e-2", []Kind{Ident, Assign, Number, EOF}},
		{"f(a, b)", []Kind{Ident, LParen, Ident, Comma, Ident, RParen, EOF}},
		{"2^3 % 4", []Kind{Number, Caret, Number, Percent, Number, EOF}},
		{"a; b\nc", []Kind{Ident, Semicolon, Ident, Newline, Ident, EOF}},
		{`convert(1, "km", "m")`, []Kind{Ident, LParen, Number, Comma, String, Comma, String, RParen, EOF}},
		{"1 # a comment\n2", []Kind{Number, Newline, Number, EOF}},
		{".5 * 2", []Kind{Number, Star, Number, EOF}},
	}
	for _, tt := range tests {
		toks, err := Tokens(tt.src)
		if err != nil {
			t.Errorf("Tokens(%q): %v", tt.src, err)
			continue
		}
		got := kinds(toks)
		if len(got) != len(tt.want) {
			t.Errorf("Tokens(%q) = %v, want %v", tt.src, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("Tokens(%q) = %v, want %v", tt.src, got, tt.want)
				break
			}
		}
	}
}

func TestLexerNumbers(t *testing.T) {
	for _, src := range []string{"0", "12", "3.25", "1e3", "1E+3", "2.5e-4", ".75"} {
		toks, err := Tokens(src)
		if err != nil {
			t.Fatalf("Tokens(%q): %v", src, err)
		}
		if toks[0].Kind != Number || toks[0].Text != src {
			t.Errorf("Tokens(%q)[0] = %v, want the number %s", src, toks[0], src)
		}
	}
}

func TestLexerStrings(t *testing.T) {
	toks, err := Tokens(`"a\"b\\c\n"`)
	if err != nil {
		t.Fatal(err)
	}
	if toks[0].Kind != String || toks[0].Text != "a\"b\\c\n" {
		t.Errorf("got %v", toks[0])
	}
}

func TestLexerPositions(t *testing.T) {
	toks, err := Tokens("a +\n  bc")
	if err != nil {
		t.Fatal(err)
	}
	want := []Pos{{1, 1}, {1, 3}, {1, 4}, {2, 3}, {2, 5}}
	for i, p := range want {
		if toks[i].Pos != p {
			t.Errorf("token %d (%v) at %v, want %v", i, toks[i], toks[i].Pos, p)
		}
	}
}

func TestLexerErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"1 $ 2", "unexpected character '$'"},
		{`"open`, "unterminated string"},
		{`"\q"`, `unknown escape \q`},
		{"12abc", `unexpected 'a' after number 12`},
	}
	for _, tt := range tests {
		_, err := Tokens(tt.src)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Tokens(%q) error = %v, want %q", tt.src, err, tt.want)
		}
	}
}
