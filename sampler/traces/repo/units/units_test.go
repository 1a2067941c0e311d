package units

import (
	"errors"
	"math"
	"testing"
)

func TestConvert(t *testing.T) {
	tests := []struct {
		x        float64
		from, to string
		want     float64
	}{
		{1, "km", "m", 1000},
		{1, "mi", "km", 1.609344},
		{12, "in", "ft", 1},
		{1, "kg", "lb", 2.2046226218487757},
		{90, "deg", "rad", math.Pi / 2},
		{1, "kWh", "J", 3.6e6},
		{1, "atm", "Pa", 101325},
		{1, "GiB", "MiB", 1024},
		{1, "byte", "bits", 8},
		{3, "hours", "min", 180},
	}
	for _, tt := range tests {
		got, err := Convert(tt.x, tt.from, tt.to)
		if err != nil {
			t.Errorf("Convert(%v, %q, %q): %v", tt.x, tt.from, tt.to, err)
			continue
		}
		if math.Abs(got-tt.want) > 1e-9*math.Abs(tt.want) {
			t.Errorf("Convert(%v, %q, %q) = %v, want %v", tt.x, tt.from, tt.to, got, tt.want)
		}
	}
}

func TestConvertErrors(t *testing.T) {
	if _, err := Convert(1, "km", "kg"); !errors.Is(err, ErrIncompatible) {
		t.Errorf("km to kg: %v", err)
	}
	if _, err := Convert(1, "furlongs", "parsecs"); err != nil {
		t.Errorf("furlongs to parsecs: %v", err)
	}
	if _, err := Convert(1, "smoot", "m"); !errors.Is(err, ErrUnknownUnit) {
		t.Errorf("smoot: %v", err)
	}
}

func TestSymbolsUnique(t *testing.T) {
	seen := map[string]string{}
	for _, u := range table {
		if prev, ok := seen[u.Symbol]; ok {
			t.Errorf("symbol %q of %s is also %s", u.Symbol, u.Name, prev)
		}
		seen[u.Symbol] = u.Name
	}
}

func TestDimensions(t *testing.T) {
	if n := len(Dimensions()); n < 15 {
		t.Errorf("only %d dimensions", n)
	}
	if len(Of(Length)) < 20 {
		t.Errorf("only %d lengths", len(Of(Length)))
	}
}
