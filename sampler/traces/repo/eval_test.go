package calc

import (
	"errors"
	"math"
	"testing"
)

func TestEval(t *testing.T) {
	tests := []struct {
		src  string
		want float64
	}{
		{"1 + 2 * 3", 7},
		{"(1 + 2) * 3", 9},
		{"10 - 4 - 3", 3},
		{"2 ^ 10", 1024},
		{"2 ^ 3 ^ 2", 512},
		{"-2 ^ 2", -4},
		{"(-2) ^ 2", 4},
		{"7 % 3", 1},
		{"x = 3; y = x ^ 2; sqrt(y + 16)", 5},
		{"min(3, 1, 2) + max(4, 9)", 10},
		{"hypot(3, 4)", 5},
		{"pow(2, 0.5) ^ 2", 2.0000000000000004},
		{"round(2.5) + floor(-1.5) + ceil(1.2)", 3},
		{"log2(8) + log10(1000) + ln(e)", 7},
		{`convert(5, "km", "m")`, 5000},
		{`convert(1, "mile", "ft")`, 5280},
		{`convert(2, "GiB", "MiB")`, 2048},
	}
	for _, tt := range tests {
		v, err := Eval(tt.src)
		if err != nil {
			t.Errorf("Eval(%q): %v", tt.src, err)
			continue
		}
		if !v.Close(Num(tt.want), 1e-12) {
			t.Errorf("Eval(%q) = %#v, want %v", tt.src, v, tt.want)
		}
	}
}

func TestEvalErrors(t *testing.T) {
	tests := []struct {
		src  string
		want error
	}{
		{"1 / 0", ErrDivisionByZero},
		{"1 % 0", ErrDivisionByZero},
		{"nope + 1", ErrUndefined},
		{"nope(1)", ErrUnknownFunc},
		{"sqrt(1, 2)", ErrArity},
		{"hypot(1)", ErrArity},
		{`sqrt("x")`, ErrType},
		{`convert(1, 2, "m")`, ErrType},
		{"sqrt(-1)", ErrDomain},
		{"ln(0)", ErrDomain},
	}
	for _, tt := range tests {
		_, err := Eval(tt.src)
		if !errors.Is(err, tt.want) {
			t.Errorf("Eval(%q) error = %v, want %v", tt.src, err, tt.want)
		}
	}
}

func TestEnv(t *testing.T) {
	env := NewEnv()
	prog, err := Parse("r = 2\narea = pi * r ^ 2")
	if err != nil {
		t.Fatal(err)
	}
	v, err := Run(prog, env)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Close(Num(4*math.Pi), 1e-12) {
		t.Errorf("area = %#v", v)
	}
	if got, _ := env.Get("r"); !got.Equal(Num(2)) {
		t.Errorf("r = %#v", got)
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		v    Value
		want string
	}{
		{Num(3), "3"},
		{Num(-0.5), "-0.5"},
		{Num(1.0 / 3), "0.333333333333"},
		{Num(1e20), "1e+20"},
		{Num(math.Inf(1)), "+Inf"},
		{Num(math.NaN()), "NaN"},
		{Str("km"), `"km"`},
	}
	for _, tt := range tests {
		if got := Format(tt.v); got != tt.want {
			t.Errorf("Format(%#v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestBuiltinsDocumented(t *testing.T) {
	for _, name := range Builtins() {
		if doc, _ := Doc(name); doc == "" {
			t.Errorf("builtin %s has no doc", name)
		}
	}
}
