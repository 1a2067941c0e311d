package calc

import (
	"fmt"
	"math"
)

// Value is the result of an expression: a number or a string.
type Value struct {
	str   string
	num   float64
	isStr bool
}

// Num returns a number value.
func Num(f float64) Value { return Value{num: f} }

// Str returns a string value.
func Str(s string) Value { return Value{str: s, isStr: true} }

// IsString reports whether v is a string.
func (v Value) IsString() bool { return v.isStr }

// Float returns the number of v, or 0 for a string.
func (v Value) Float() float64 { return v.num }

// Text returns the string of v, or "" for a number.
func (v Value) Text() string { return v.str }

// Equal reports whether two values are the same, numbers compared exactly
// (NaN equals NaN, so that tests can expect it).
func (v Value) Equal(w Value) bool {
	if v.isStr || w.isStr {
		return v.isStr == w.isStr && v.str == w.str
	}
	if math.IsNaN(v.num) && math.IsNaN(w.num) {
		return true
	}
	return v.num == w.num
}

// Close reports whether two numbers are equal within a relative tolerance.
func (v Value) Close(w Value, tol float64) bool {
	if v.isStr || w.isStr {
		return v.Equal(w)
	}
	if v.num == w.num {
		return true
	}
	diff := math.Abs(v.num - w.num)
	scale := math.Max(math.Abs(v.num), math.Abs(w.num))
	return diff <= tol*scale
}

// GoString formats v for test failures.
func (v Value) GoString() string {
	if v.isStr {
		return fmt.Sprintf("Str(%q)", v.str)
	}
	return fmt.Sprintf("Num(%v)", v.num)
}

func (v Value) typeName() string {
	if v.isStr {
		return "string"
	}
	return "number"
}
