package calc

import (
	"strconv"
	"strings"
)

// Node is an expression or statement.
type Node interface {
	Pos() Pos
	String() string
}

// NumberLit is a number literal.
type NumberLit struct {
	At    Pos
	Value float64
	Text  string
}

// StringLit is a string literal.
type StringLit struct {
	At    Pos
	Value string
}

// Var is a reference to a variable.
type Var struct {
	At   Pos
	Name string
}

// Unary is a prefix operation: only negation.
type Unary struct {
	At Pos
	Op Kind
	X  Node
}

// Binary is an infix operation.
type Binary struct {
	At   Pos
	Op   Kind
	X, Y Node
}

// Call is a call of a builtin function.
type Call struct {
	At   Pos
	Func string
	Args []Node
}

// Assignment binds a variable to a value.
type Assignment struct {
	At   Pos
	Name string
	X    Node
}

// Program is a list of statements.
type Program struct {
	Stmts []Node
}

func (n *NumberLit) Pos() Pos  { return n.At }
func (n *StringLit) Pos() Pos  { return n.At }
func (n *Var) Pos() Pos        { return n.At }
func (n *Unary) Pos() Pos      { return n.At }
func (n *Binary) Pos() Pos     { return n.At }
func (n *Call) Pos() Pos       { return n.At }
func (n *Assignment) Pos() Pos { return n.At }

// Pos is the position of the first statement.
func (p *Program) Pos() Pos {
	if len(p.Stmts) == 0 {
		return Pos{Line: 1, Col: 1}
	}
	return p.Stmts[0].Pos()
}

func (n *NumberLit) String() string {
	if n.Text != "" {
		return n.Text
	}
	return strconv.FormatFloat(n.Value, 'g', -1, 64)
}

func (n *StringLit) String() string { return strconv.Quote(n.Value) }
func (n *Var) String() string       { return n.Name }

// String prints the operation fully parenthesized, so that tests can
// check how the parser grouped it.
func (n *Unary) String() string { return "(-" + n.X.String() + ")" }

func (n *Binary) String() string {
	return "(" + n.X.String() + " " + opText(n.Op) + " " + n.Y.String() + ")"
}

func (n *Call) String() string {
	args := make([]string, len(n.Args))
	for i, a := range n.Args {
		args[i] = a.String()
	}
	return n.Func + "(" + strings.Join(args, ", ") + ")"
}

func (n *Assignment) String() string { return n.Name + " = " + n.X.String() }

func (p *Program) String() string {
	s := make([]string, len(p.Stmts))
	for i, st := range p.Stmts {
		s[i] = st.String()
	}
	return strings.Join(s, "; ")
}

func opText(k Kind) string {
	switch k {
	case Plus:
		return "+"
	case Minus:
		return "-"
	case Star:
		return "*"
	case Slash:
		return "/"
	case Percent:
		return "%"
	case Caret:
		return "^"
	}
	return k.String()
}
