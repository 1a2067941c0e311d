package calc

import (
	"math"
	"sort"
)

// Env holds the variables of a program.
type Env struct {
	vars map[string]Value
}

// NewEnv returns an environment with the constants pi, e and phi.
func NewEnv() *Env {
	return &Env{vars: map[string]Value{
		"pi":  Num(math.Pi),
		"e":   Num(math.E),
		"phi": Num(math.Phi),
	}}
}

// Get returns the value of a variable.
func (e *Env) Get(name string) (Value, bool) {
	v, ok := e.vars[name]
	return v, ok
}

// Set binds a variable.
func (e *Env) Set(name string, v Value) { e.vars[name] = v }

// Names returns the bound names, sorted.
func (e *Env) Names() []string {
	names := make([]string, 0, len(e.vars))
	for n := range e.vars {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Eval parses and evaluates src in a new environment.
func Eval(src string) (Value, error) {
	prog, err := Parse(src)
	if err != nil {
		return Value{}, err
	}
	return Run(prog, NewEnv())
}

// Run evaluates the statements of prog in env and returns the value of the
// last one; an empty program is 0.
func Run(prog *Program, env *Env) (Value, error) {
	var last Value
	for _, st := range prog.Stmts {
		v, err := evalNode(st, env)
		if err != nil {
			return Value{}, err
		}
		last = v
	}
	return last, nil
}

func evalNode(n Node, env *Env) (Value, error) {
	switch n := n.(type) {
	case *NumberLit:
		return Num(n.Value), nil
	case *StringLit:
		return Str(n.Value), nil
	case *Var:
		v, ok := env.Get(n.Name)
		if !ok {
			return Value{}, evalErrorf(n.At, ErrUndefined, "%s", n.Name)
		}
		return v, nil
	case *Assignment:
		v, err := evalNode(n.X, env)
		if err != nil {
			return Value{}, err
		}
		env.Set(n.Name, v)
		return v, nil
	case *Unary:
		x, err := evalNumber(n.X, env)
		if err != nil {
			return Value{}, err
		}
		return Num(-x), nil
	case *Binary:
		return evalBinary(n, env)
	case *Call:
		args := make([]Value, len(n.Args))
		for i, a := range n.Args {
			v, err := evalNode(a, env)
			if err != nil {
				return Value{}, err
			}
			args[i] = v
		}
		return callBuiltin(n, args)
	}
	return Value{}, errorf(n.Pos(), "cannot evaluate %T", n)
}

// evalNumber evaluates n and requires a number.
func evalNumber(n Node, env *Env) (float64, error) {
	v, err := evalNode(n, env)
	if err != nil {
		return 0, err
	}
	if v.IsString() {
		return 0, evalErrorf(n.Pos(), ErrType, "want a number, got a string")
	}
	return v.Float(), nil
}

func evalBinary(n *Binary, env *Env) (Value, error) {
	x, err := evalNumber(n.X, env)
	if err != nil {
		return Value{}, err
	}
	y, err := evalNumber(n.Y, env)
	if err != nil {
		return Value{}, err
	}
	switch n.Op {
	case Plus:
		return Num(x + y), nil
	case Minus:
		return Num(x - y), nil
	case Star:
		return Num(x * y), nil
	case Slash:
		if y == 0 {
			return Value{}, evalErrorf(n.At, ErrDivisionByZero, "%v / 0", x)
		}
		return Num(x / y), nil
	case Percent:
		if y == 0 {
			return Value{}, evalErrorf(n.At, ErrDivisionByZero, "%v %% 0", x)
		}
		return Num(math.Mod(x, y)), nil
	case Caret:
		return Num(math.Pow(x, y)), nil
	}
	return Value{}, errorf(n.At, "unknown operator %s", n.Op)
}
