package ablate

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"time"
)

// report.html is one self-contained page: the run's config, both tables and
// every chart inline, readable offline and attachable to a paper's
// artifacts. Its script only counts the charts the browser drew (the
// report test reads the count from headless Chromium).
//
//go:embed report.html.tmpl
var reportHTML string

var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"ms":         func(us float64) string { return strconv.FormatFloat(us/1e3, 'f', 1, 64) },
	"us":         func(us float64) string { return strconv.FormatFloat(us, 'f', 0, 64) },
	"x":          func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
	"pct":        func(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" },
	"rate":       rateLabel,
	"div":        ratio,
	"kb":         func(b float64) string { return strconv.FormatFloat(b/1e3, 'f', 1, 64) },
	"dur":        func(us float64) string { return time.Duration(us * 1e3).String() },
	"ci":         WithInterval,
	"scale":      scaled,
	"conclusion": Conclusion,
	"minSlope":   func() int { return MinSlopeRoundTrips },
	"count":      Count,
	"svg":        func(b []byte) template.HTML { return template.HTML(b) }, // our own gonum/plot output
}).Parse(reportHTML))

// WriteReport writes report.html, with charts drawn by Charts.
func (r *Results) WriteReport(w io.Writer, charts []Chart) error {
	if err := reportTmpl.Execute(w, struct {
		*Results
		Charts []Chart
	}{r, charts}); err != nil {
		return fmt.Errorf("ablate: report: %w", err)
	}
	return nil
}

// Count is n and its noun, plural but for one: "1 round", "3 rounds".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
