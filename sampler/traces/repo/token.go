package calc

import "fmt"

// Kind is the kind of a token.
type Kind int

// Token kinds.
const (
	EOF Kind = iota
	Number
	String
	Ident
	Plus
	Minus
	Star
	Slash
	Percent
	Caret
	LParen
	RParen
	Comma
	Assign
	Semicolon
	Newline
)

var kindNames = map[Kind]string{
	EOF:       "end of input",
	Number:    "number",
	String:    "string",
	Ident:     "identifier",
	Plus:      "'+'",
	Minus:     "'-'",
	Star:      "'*'",
	Slash:     "'/'",
	Percent:   "'%'",
	Caret:     "'^'",
	LParen:    "'('",
	RParen:    "')'",
	Comma:     "','",
	Assign:    "'='",
	Semicolon: "';'",
	Newline:   "new line",
}

// String names the kind for error messages.
func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Pos is a position in the source: a 1-based line and column.
type Pos struct {
	Line, Col int
}

// String formats the position as line:col.
func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Token is one lexical token.
type Token struct {
	Kind Kind
	Text string // the source text of the token; unquoted for strings
	Pos  Pos
}

// String formats the token for debugging.
func (t Token) String() string {
	switch t.Kind {
	case Number, Ident:
		return fmt.Sprintf("%s %q at %s", t.Kind, t.Text, t.Pos)
	case String:
		return fmt.Sprintf("string %q at %s", t.Text, t.Pos)
	}
	return fmt.Sprintf("%s at %s", t.Kind, t.Pos)
}

// binaryOp describes a binary operator: its precedence (higher binds
// tighter) and whether it groups to the right.
type binaryOp struct {
	prec       int
	rightAssoc bool
}

// Precedences. Unary minus sits between the multiplicative operators and
// the power operator, so -2^2 is -(2^2).
const (
	precAdditive       = 1
	precMultiplicative = 2
	precUnary          = 3
	precPower          = 4
)

var binaryOps = map[Kind]binaryOp{
	Plus:    {prec: precAdditive},
	Minus:   {prec: precAdditive},
	Star:    {prec: precMultiplicative},
	Slash:   {prec: precMultiplicative},
	Percent: {prec: precMultiplicative},
	Caret:   {prec: precPower, rightAssoc: true},
}
