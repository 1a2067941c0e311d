package calc

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Lexer splits source text into tokens.
type Lexer struct {
	src  string
	off  int // byte offset of the next rune
	line int
	col  int
}

// NewLexer returns a lexer of src.
func NewLexer(src string) *Lexer {
	return &Lexer{src: src, line: 1, col: 1}
}

// Tokens lexes the whole source, ending with an EOF token.
func Tokens(src string) ([]Token, error) {
	lx := NewLexer(src)
	var out []Token
	for {
		t, err := lx.Next()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		if t.Kind == EOF {
			return out, nil
		}
	}
}

func (lx *Lexer) peek() rune {
	if lx.off >= len(lx.src) {
		return -1
	}
	r, _ := utf8.DecodeRuneInString(lx.src[lx.off:])
	return r
}

func (lx *Lexer) peekAt(n int) rune {
	off := lx.off
	for i := 0; i < n; i++ {
		if off >= len(lx.src) {
			return -1
		}
		_, size := utf8.DecodeRuneInString(lx.src[off:])
		off += size
	}
	if off >= len(lx.src) {
		return -1
	}
	r, _ := utf8.DecodeRuneInString(lx.src[off:])
	return r
}

func (lx *Lexer) advance() rune {
	r, size := utf8.DecodeRuneInString(lx.src[lx.off:])
	lx.off += size
	if r == '\n' {
		lx.line++
		lx.col = 1
	} else {
		lx.col++
	}
	return r
}

func (lx *Lexer) pos() Pos { return Pos{Line: lx.line, Col: lx.col} }

var singles = map[rune]Kind{
	'+': Plus,
	'-': Minus,
	'*': Star,
	'/': Slash,
	'%': Percent,
	'^': Caret,
	'(': LParen,
	')': RParen,
	',': Comma,
	'=': Assign,
	';': Semicolon,
}

// Next returns the next token. Spaces and tabs separate tokens; a new line
// is a token of its own, because it ends a statement. A '#' starts a
// comment that runs to the end of the line.
func (lx *Lexer) Next() (Token, error) {
	for {
		r := lx.peek()
		switch {
		case r == ' ' || r == '\t' || r == '\r':
			lx.advance()
			continue
		case r == '#':
			for lx.peek() != '\n' && lx.peek() != -1 {
				lx.advance()
			}
			continue
		}
		break
	}
	start := lx.pos()
	r := lx.peek()
	switch {
	case r == -1:
		return Token{Kind: EOF, Pos: start}, nil
	case r == '\n':
		lx.advance()
		return Token{Kind: Newline, Text: "\n", Pos: start}, nil
	case isDigit(r) || (r == '.' && isDigit(lx.peekAt(1))):
		return lx.number(start)
	case r == '"':
		return lx.str(start)
	case isIdentStart(r):
		var b strings.Builder
		for isIdentPart(lx.peek()) {
			b.WriteRune(lx.advance())
		}
		return Token{Kind: Ident, Text: b.String(), Pos: start}, nil
	}
	if k, ok := singles[r]; ok {
		lx.advance()
		return Token{Kind: k, Text: string(r), Pos: start}, nil
	}
	return Token{}, errorf(start, "unexpected character %q", r)
}

// number lexes digits, an optional fraction and an optional exponent.
func (lx *Lexer) number(start Pos) (Token, error) {
	begin := lx.off
	for isDigit(lx.peek()) {
		lx.advance()
	}
	if lx.peek() == '.' {
		lx.advance()
		for isDigit(lx.peek()) {
			lx.advance()
		}
	}
	if r := lx.peek(); r == 'e' || r == 'E' {
		next := lx.peekAt(1)
		if isDigit(next) || ((next == '+' || next == '-') && isDigit(lx.peekAt(2))) {
			lx.advance()
			if next == '+' || next == '-' {
				lx.advance()
			}
			for isDigit(lx.peek()) {
				lx.advance()
			}
		}
	}
	text := lx.src[begin:lx.off]
	if isIdentStart(lx.peek()) {
		return Token{}, errorf(lx.pos(), "unexpected %q after number %s", lx.peek(), text)
	}
	return Token{Kind: Number, Text: text, Pos: start}, nil
}

// str lexes a double-quoted string with the escapes \" \\ \n and \t.
func (lx *Lexer) str(start Pos) (Token, error) {
	lx.advance() // opening quote
	var b strings.Builder
	for {
		r := lx.peek()
		switch r {
		case -1, '\n':
			return Token{}, errorf(start, "unterminated string")
		case '"':
			lx.advance()
			return Token{Kind: String, Text: b.String(), Pos: start}, nil
		case '\\':
			lx.advance()
			switch e := lx.peek(); e {
			case '"', '\\':
				b.WriteRune(lx.advance())
			case 'n':
				lx.advance()
				b.WriteByte('\n')
			case 't':
				lx.advance()
				b.WriteByte('\t')
			default:
				return Token{}, errorf(lx.pos(), "unknown escape \\%c", e)
			}
		default:
			b.WriteRune(lx.advance())
		}
	}
}

func isDigit(r rune) bool      { return r >= '0' && r <= '9' }
func isIdentStart(r rune) bool { return r == '_' || unicode.IsLetter(r) }
func isIdentPart(r rune) bool  { return isIdentStart(r) || unicode.IsDigit(r) }
