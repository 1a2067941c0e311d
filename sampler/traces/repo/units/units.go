// Package units converts quantities between units of the same dimension.
//
// Every unit is a factor times its dimension's base unit (metre, kilogram,
// second, ...), so a conversion multiplies by the source factor and divides
// by the target factor. The table is in table.go.
package units

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Dimension is what a unit measures.
type Dimension string

// Dimensions.
const (
	Length      Dimension = "length"
	Mass        Dimension = "mass"
	Time        Dimension = "time"
	Area        Dimension = "area"
	Volume      Dimension = "volume"
	Speed       Dimension = "speed"
	Energy      Dimension = "energy"
	Power       Dimension = "power"
	Pressure    Dimension = "pressure"
	Data        Dimension = "data"
	Frequency   Dimension = "frequency"
	Force       Dimension = "force"
	Angle       Dimension = "angle"
	Current     Dimension = "current"
	Voltage     Dimension = "voltage"
	Resistance  Dimension = "resistance"
	Charge      Dimension = "charge"
	Luminosity  Dimension = "luminosity"
	Amount      Dimension = "amount"
	Temperature Dimension = "temperature"
)

// Unit is one unit of measure.
type Unit struct {
	Name   string    // long name, singular
	Symbol string    // short symbol
	Dim    Dimension // what it measures
	Factor float64   // size in base units of Dim
}

// Errors of Convert.
var (
	ErrUnknownUnit  = errors.New("unknown unit")
	ErrIncompatible = errors.New("incompatible units")
)

var bySymbol, byName map[string]*Unit

func init() {
	bySymbol = make(map[string]*Unit, len(table))
	byName = make(map[string]*Unit, len(table))
	for i := range table {
		u := &table[i]
		bySymbol[u.Symbol] = u
		byName[strings.ToLower(u.Name)] = u
	}
}

// Lookup finds a unit by symbol (case-sensitive: "mm" is not "Mm"), then by
// name, singular or plural, ignoring case.
func Lookup(s string) (*Unit, error) {
	if u, ok := bySymbol[s]; ok {
		return u, nil
	}
	l := strings.ToLower(s)
	if u, ok := byName[l]; ok {
		return u, nil
	}
	if u, ok := byName[strings.TrimSuffix(l, "s")]; ok {
		return u, nil
	}
	if u, ok := byName[strings.TrimSuffix(l, "es")]; ok {
		return u, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownUnit, s)
}

// Convert converts x from one unit to another of the same dimension.
func Convert(x float64, from, to string) (float64, error) {
	f, err := Lookup(from)
	if err != nil {
		return 0, err
	}
	t, err := Lookup(to)
	if err != nil {
		return 0, err
	}
	if f.Dim != t.Dim {
		return 0, fmt.Errorf("%w: %s is %s, %s is %s", ErrIncompatible, f.Symbol, f.Dim, t.Symbol, t.Dim)
	}
	return x * f.Factor / t.Factor, nil
}

// Of returns the units of a dimension, sorted by factor.
func Of(d Dimension) []Unit {
	var out []Unit
	for _, u := range table {
		if u.Dim == d {
			out = append(out, u)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Factor < out[j].Factor })
	return out
}

// Dimensions returns every dimension in the table, sorted.
func Dimensions() []Dimension {
	seen := map[Dimension]bool{}
	var out []Dimension
	for _, u := range table {
		if !seen[u.Dim] {
			seen[u.Dim] = true
			out = append(out, u.Dim)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
