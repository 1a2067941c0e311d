package ablate

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// LoadRun is a whole `tether ablate --load` run: one LoadResult per number
// of clients, in the order they ran.
type LoadRun struct {
	Schema  string        `json:"schema"`
	Machine Machine       `json:"machine"`
	Results []*LoadResult `json:"results"`
}

// LoadSchemaVersion names load.json's shape.
const LoadSchemaVersion = "tether.ablate.load/1"

// WriteFiles writes load.json and the run's charts, load-lag.svg (the p99
// token delivery lag of each second), load-rss.svg (the server's resident
// memory over time) and load-goroutines.svg (its goroutines), one line per
// number of clients, into dir.
func (lr *LoadRun) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(lr, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "load.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	for _, c := range []struct {
		name, title, y string
		v              func(LoadSample) float64
	}{
		{"load-lag.svg", "Token delivery lag, p99 of each second", "lag (ms)", func(s LoadSample) float64 { return s.LagP99US / 1e3 }},
		{"load-rss.svg", "Server resident memory", "RSS (MiB)", func(s LoadSample) float64 { return s.ServerRSSMiB }},
		{"load-goroutines.svg", "Server goroutines", "goroutines", func(s LoadSample) float64 { return float64(s.ServerGoroutines) }},
	} {
		svg, err := lr.chart(c.title, c.y, c.v)
		if err != nil {
			return fmt.Errorf("ablate: chart: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.name), svg, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// chart plots v of every second, one line per result.
func (lr *LoadRun) chart(title, y string, v func(LoadSample) float64) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = y
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	for i, r := range lr.Results {
		var xys plotter.XYs
		for _, s := range r.Samples {
			xys = append(xys, plotter.XY{X: s.T, Y: v(s)})
		}
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Width = vg.Points(1.5)
		l.Color = plotColor(i)
		l.Dashes = []vg.Length{}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%d clients", r.Clients), l)
	}
	return render(p, 7*vg.Inch, 4*vg.Inch)
}

// plotColor is the i-th color of gonum's palette.
func plotColor(i int) color.Color { return lineColors[i%len(lineColors)] }

var lineColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

// NewLoadRun is an empty run on this machine.
func NewLoadRun() *LoadRun {
	return &LoadRun{Schema: LoadSchemaVersion, Machine: machine()}
}
