package calc

import (
	"strings"
	"testing"
)

// TestParseGrouping checks how the parser groups operators, from the
// fully parenthesized form that Node.String prints.
func TestParseGrouping(t *testing.T) {
	tests := []struct{ src, want string }{
		{"1 + 2 * 3", "(1 + (2 * 3))"},
		{"1 - 2 - 3", "((1 - 2) - 3)"},
		{"8 / 4 / 2", "((8 / 4) / 2)"},
		{"(1 + 2) * 3", "((1 + 2) * 3)"},
		{"-2 ^ 2", "(-(2 ^ 2))"},
		{"2 * -3", "(2 * (-3))"},
		{"2 ^ -1", "(2 ^ (-1))"},
		{"2 ^ 3 ^ 2", "(2 ^ (3 ^ 2))"},
		{"a ^ b ^ c ^ d", "(a ^ (b ^ (c ^ d)))"},
		{"f(1, 2 + x)", "f(1, (2 + x))"},
		{"x = 1 + 2", "x = (1 + 2)"},
	}
	for _, tt := range tests {
		prog, err := Parse(tt.src)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.src, err)
			continue
		}
		if got := prog.String(); got != tt.want {
			t.Errorf("Parse(%q) = %s, want %s", tt.src, got, tt.want)
		}
	}
}

func TestParseProgram(t *testing.T) {
	prog, err := Parse("x = 1; y = 2\n\nx + y;")
	if err != nil {
		t.Fatal(err)
	}
	if len(prog.Stmts) != 3 {
		t.Fatalf("got %d statements: %s", len(prog.Stmts), prog)
	}
}

func TestParseExpr(t *testing.T) {
	if _, err := ParseExpr("1 + 2"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseExpr("1; 2"); err == nil {
		t.Fatal("ParseExpr accepted two statements")
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"1 +", "unexpected end of input"},
		{"(1 + 2", "expected ')'"},
		{"f(1 2)", "expected ',' or ')' in call of f"},
		{"1 2", "expected end of statement"},
		{")", "unexpected ')'"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.src)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) error = %v, want %q", tt.src, err, tt.want)
		}
	}
}
