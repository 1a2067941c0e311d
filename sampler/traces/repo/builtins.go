package calc

import (
	"math"
	"sort"

	"example.com/calc/units"
)

// builtin is a function callable from expressions.
type builtin struct {
	minArgs, maxArgs int // maxArgs < 0: variadic
	doc              string
	fn               func(args []Value) (Value, error)
}

// unary wraps a function of one number.
func unary(doc string, f func(float64) float64) builtin {
	return builtin{minArgs: 1, maxArgs: 1, doc: doc, fn: func(a []Value) (Value, error) {
		return Num(f(a[0].Float())), nil
	}}
}

// positive wraps a function of one number that is only defined above zero.
func positive(doc string, f func(float64) float64) builtin {
	return builtin{minArgs: 1, maxArgs: 1, doc: doc, fn: func(a []Value) (Value, error) {
		if a[0].Float() <= 0 {
			return Value{}, ErrDomain
		}
		return Num(f(a[0].Float())), nil
	}}
}

var builtins = map[string]builtin{
	"abs":   unary("absolute value", math.Abs),
	"ceil":  unary("smallest integer not below x", math.Ceil),
	"floor": unary("largest integer not above x", math.Floor),
	"round": unary("nearest integer, halves away from zero", math.Round),
	"sqrt": {minArgs: 1, maxArgs: 1, doc: "square root", fn: func(a []Value) (Value, error) {
		if a[0].Float() < 0 {
			return Value{}, ErrDomain
		}
		return Num(math.Sqrt(a[0].Float())), nil
	}},
	"exp":   unary("e to the power x", math.Exp),
	"ln":    positive("natural logarithm", math.Log),
	"log10": positive("decimal logarithm", math.Log10),
	"log2":  positive("binary logarithm", math.Log2),
	"sin":   unary("sine of x radians", math.Sin),
	"cos":   unary("cosine of x radians", math.Cos),
	"tan":   unary("tangent of x radians", math.Tan),
	"min": {minArgs: 1, maxArgs: -1, doc: "smallest argument", fn: func(a []Value) (Value, error) {
		m := a[0].Float()
		for _, v := range a[1:] {
			m = math.Min(m, v.Float())
		}
		return Num(m), nil
	}},
	"max": {minArgs: 1, maxArgs: -1, doc: "largest argument", fn: func(a []Value) (Value, error) {
		m := a[0].Float()
		for _, v := range a[1:] {
			m = math.Max(m, v.Float())
		}
		return Num(m), nil
	}},
	"hypot": {minArgs: 2, maxArgs: 2, doc: "sqrt(x*x + y*y)", fn: func(a []Value) (Value, error) {
		return Num(math.Hypot(a[0].Float(), a[1].Float())), nil
	}},
	"pow": {minArgs: 2, maxArgs: 2, doc: "x to the power y, as x ^ y", fn: func(a []Value) (Value, error) {
		return Num(math.Pow(a[0].Float(), a[1].Float())), nil
	}},
}

// stringArgs names, per builtin, the argument indices that must be strings;
// every other argument must be a number.
var stringArgs = map[string][]int{
	"convert": {1, 2},
}

func init() {
	builtins["convert"] = builtin{minArgs: 3, maxArgs: 3, doc: `convert(x, "from", "to") converts between units`, fn: func(a []Value) (Value, error) {
		v, err := units.Convert(a[0].Float(), a[1].Text(), a[2].Text())
		if err != nil {
			return Value{}, err
		}
		return Num(v), nil
	}}
}

// Builtins returns the names of the builtin functions, sorted.
func Builtins() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Doc returns the one-line documentation of a builtin.
func Doc(name string) (string, bool) {
	b, ok := builtins[name]
	return b.doc, ok
}

// callBuiltin checks the arguments of a call and runs the builtin.
func callBuiltin(c *Call, args []Value) (Value, error) {
	b, ok := builtins[c.Func]
	if !ok {
		return Value{}, evalErrorf(c.At, ErrUnknownFunc, "%s", c.Func)
	}
	if len(args) < b.minArgs || (b.maxArgs >= 0 && len(args) > b.maxArgs) {
		return Value{}, evalErrorf(c.At, ErrArity, "%s takes %s, got %d", c.Func, arity(b), len(args))
	}
	strs := stringArgs[c.Func]
	for i, a := range args {
		want := false
		for _, j := range strs {
			if i == j {
				want = true
			}
		}
		if a.IsString() != want {
			return Value{}, evalErrorf(c.Args[i].Pos(), ErrType, "argument %d of %s: got a %s", i+1, c.Func, a.typeName())
		}
	}
	v, err := b.fn(args)
	if err != nil {
		return Value{}, evalErrorf(c.At, err, "%s", c.Func)
	}
	return v, nil
}

func arity(b builtin) string {
	switch {
	case b.maxArgs < 0:
		return "at least " + itoa(b.minArgs) + " arguments"
	case b.minArgs == b.maxArgs && b.minArgs == 1:
		return "1 argument"
	case b.minArgs == b.maxArgs:
		return itoa(b.minArgs) + " arguments"
	}
	return itoa(b.minArgs) + " to " + itoa(b.maxArgs) + " arguments"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
