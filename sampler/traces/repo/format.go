package calc

import (
	"math"
	"strconv"
	"strings"
)

// Format prints a value: strings quoted, integers without a fraction,
// other numbers with at most 12 significant digits and no trailing zeros.
func Format(v Value) string {
	if v.IsString() {
		return strconv.Quote(v.Text())
	}
	f := v.Float()
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case f == math.Trunc(f) && math.Abs(f) < 1e15:
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	s := strconv.FormatFloat(f, 'g', 12, 64)
	if strings.ContainsAny(s, "eE") {
		mant, exp, _ := strings.Cut(s, "e")
		return trimZeros(mant) + "e" + exp
	}
	return trimZeros(s)
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
