package calc

import (
	"errors"
	"fmt"
)

// Error is an error at a position in the source.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Pos, e.Msg) }

// errorf returns an *Error at pos.
func errorf(pos Pos, format string, args ...any) error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// Sentinel errors, wrapped by the errors evaluation returns.
var (
	ErrDivisionByZero = errors.New("division by zero")
	ErrUndefined      = errors.New("undefined variable")
	ErrUnknownFunc    = errors.New("unknown function")
	ErrArity          = errors.New("wrong number of arguments")
	ErrType           = errors.New("type mismatch")
	ErrDomain         = errors.New("argument out of domain")
)

// evalError wraps a sentinel with a position and details.
type evalError struct {
	pos    Pos
	err    error
	detail string
}

func (e *evalError) Error() string {
	if e.detail == "" {
		return fmt.Sprintf("%s: %v", e.pos, e.err)
	}
	return fmt.Sprintf("%s: %v: %s", e.pos, e.err, e.detail)
}

func (e *evalError) Unwrap() error { return e.err }

func evalErrorf(pos Pos, err error, format string, args ...any) error {
	return &evalError{pos: pos, err: err, detail: fmt.Sprintf(format, args...)}
}
