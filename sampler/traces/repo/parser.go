package calc

import "strconv"

// Parser builds nodes from tokens by precedence climbing.
type Parser struct {
	toks []Token
	i    int
}

// Parse parses a program: statements separated by ';' or new lines.
func Parse(src string) (*Program, error) {
	toks, err := Tokens(src)
	if err != nil {
		return nil, err
	}
	p := &Parser{toks: toks}
	return p.program()
}

// ParseExpr parses a single expression and nothing else.
func ParseExpr(src string) (Node, error) {
	toks, err := Tokens(src)
	if err != nil {
		return nil, err
	}
	p := &Parser{toks: toks}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.Kind != EOF {
		return nil, errorf(t.Pos, "unexpected %s after expression", t.Kind)
	}
	return n, nil
}

func (p *Parser) peek() Token { return p.toks[p.i] }

func (p *Parser) next() Token {
	t := p.toks[p.i]
	if t.Kind != EOF {
		p.i++
	}
	return t
}

func (p *Parser) expect(k Kind) (Token, error) {
	t := p.next()
	if t.Kind != k {
		return t, errorf(t.Pos, "expected %s, found %s", k, t.Kind)
	}
	return t, nil
}

func (p *Parser) program() (*Program, error) {
	prog := &Program{}
	for {
		for k := p.peek().Kind; k == Semicolon || k == Newline; k = p.peek().Kind {
			p.next()
		}
		if p.peek().Kind == EOF {
			return prog, nil
		}
		st, err := p.statement()
		if err != nil {
			return nil, err
		}
		prog.Stmts = append(prog.Stmts, st)
		switch t := p.peek(); t.Kind {
		case Semicolon, Newline, EOF:
		default:
			return nil, errorf(t.Pos, "expected end of statement, found %s", t.Kind)
		}
	}
}

// statement is an assignment "name = expr" or an expression.
func (p *Parser) statement() (Node, error) {
	if t := p.peek(); t.Kind == Ident && p.toks[p.i+1].Kind == Assign {
		p.next()
		p.next()
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		return &Assignment{At: t.Pos, Name: t.Text, X: x}, nil
	}
	return p.expr()
}

func (p *Parser) expr() (Node, error) { return p.binary(precAdditive) }

// binary parses operations whose operators bind at least as tightly as
// minPrec. The right operand of an operator is parsed at a higher minimum
// precedence, so that operators of the same precedence group to the left.
func (p *Parser) binary(minPrec int) (Node, error) {
	x, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		op, ok := binaryOps[t.Kind]
		if !ok || op.prec < minPrec {
			return x, nil
		}
		p.next()
		y, err := p.binary(op.prec + 1)
		if err != nil {
			return nil, err
		}
		x = &Binary{At: t.Pos, Op: t.Kind, X: x, Y: y}
	}
}

// unary parses a negation, whose operand binds tighter than '*' but looser
// than '^': -2^2 is -(2^2).
func (p *Parser) unary() (Node, error) {
	if t := p.peek(); t.Kind == Minus {
		p.next()
		x, err := p.binary(precUnary)
		if err != nil {
			return nil, err
		}
		return &Unary{At: t.Pos, Op: Minus, X: x}, nil
	}
	return p.primary()
}

// primary parses a literal, a variable, a call or a parenthesized
// expression.
func (p *Parser) primary() (Node, error) {
	t := p.next()
	switch t.Kind {
	case Number:
		v, err := strconv.ParseFloat(t.Text, 64)
		if err != nil {
			return nil, errorf(t.Pos, "bad number %q", t.Text)
		}
		return &NumberLit{At: t.Pos, Value: v, Text: t.Text}, nil
	case String:
		return &StringLit{At: t.Pos, Value: t.Text}, nil
	case Ident:
		if p.peek().Kind == LParen {
			return p.call(t)
		}
		return &Var{At: t.Pos, Name: t.Text}, nil
	case LParen:
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(RParen); err != nil {
			return nil, err
		}
		return x, nil
	}
	return nil, errorf(t.Pos, "unexpected %s", t.Kind)
}

// call parses the argument list of a call of name.
func (p *Parser) call(name Token) (Node, error) {
	p.next() // '('
	c := &Call{At: name.Pos, Func: name.Text}
	if p.peek().Kind == RParen {
		p.next()
		return c, nil
	}
	for {
		a, err := p.expr()
		if err != nil {
			return nil, err
		}
		c.Args = append(c.Args, a)
		t := p.next()
		switch t.Kind {
		case Comma:
			continue
		case RParen:
			return c, nil
		}
		return nil, errorf(t.Pos, "expected ',' or ')' in call of %s, found %s", name.Text, t.Kind)
	}
}
