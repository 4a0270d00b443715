package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/switchboard-go/switchboard/benchmarks/internal/chaos"
	"github.com/switchboard-go/switchboard/benchmarks/internal/svgchart"
)

// smoothing is the span of the moving average of the charts' lines: a second's count at a
// hundred jobs a second jumps with every batch, and five seconds still show a fault's dip.
const smoothing = 5

// writeCharts writes one SVG file per class of the scorecards into dir, a row per scenario
// with each system's completed jobs a second over the scenario's time, the fault and pressure
// phases shaded; it returns the files' names by class (a class no cell ran has none).
func writeCharts(cards []chaos.Scorecard, dir string) (map[chaos.Class]string, error) {
	files := map[chaos.Class]string{}
	if len(cards) == 0 {
		return files, nil
	}
	for _, class := range []chaos.Class{chaos.Chaos, chaos.Pressure} {
		leg := svgchart.NewLegend()
		var rows []*plot.Plot
		for _, first := range cards[0].Cells {
			if first.Class != class {
				continue
			}
			p := plot.New()
			p.Title.Text = first.Scenario
			p.Title.TextStyle.Font.Size = vg.Points(10)
			p.X.Label.Text = "seconds since the first phase after the warmup"
			p.Y.Label.Text = "jobs/s"
			p.X.Label.TextStyle.Font.Size = vg.Points(8)
			p.Y.Label.TextStyle.Font.Size = vg.Points(8)
			p.X.Min = 0
			p.Add(&bands{windows: first.Result.Timeline.Windows, start: first.Result.TraceStart})
			top := 0.0
			for i, card := range cards {
				cell, ok := card.Cell(first.Scenario)
				if !ok || len(cell.Result.Trace) == 0 {
					continue
				}
				xys := movingAverage(cell.Result.Trace, smoothing)
				for _, xy := range xys {
					top = max(top, xy.Y)
				}
				line, err := plotter.NewLine(xys)
				if err != nil {
					return nil, fmt.Errorf("%s, %s: %w", card.System, first.Scenario, err)
				}
				line.Color, line.Width = svgchart.ColorAt(i), vg.Points(1.2)
				p.Add(line)
				if len(rows) == 0 {
					leg.Add(card.System, line)
				}
			}
			// From zero, so that a dip reads as a share of the clean rate.
			p.Y.Min, p.Y.Max = 0, math.Max(top*1.15, 1)
			rows = append(rows, p)
		}
		if len(rows) == 0 {
			continue
		}
		leg.Add("fault or pressure", &bands{})
		name := fmt.Sprintf("%s.svg", class)
		if err := svgchart.SaveRows(rows, leg, 17*vg.Centimeter, 5*vg.Centimeter, 3.5*vg.Centimeter, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
		files[class] = name
	}
	return files, nil
}

// movingAverage is the trailing average of trace over span seconds (fewer at its start), a
// point a second, at the end of its second.
func movingAverage(trace []float64, span int) plotter.XYs {
	xys := make(plotter.XYs, len(trace))
	sum := 0.0
	for i, v := range trace {
		sum += v
		n := min(i+1, span)
		if i >= span {
			sum -= trace[i-span]
		}
		xys[i] = plotter.XY{X: float64(i + 1), Y: sum / float64(n)}
	}
	return xys
}

// shade is the fill of the fault and pressure phases.
var shade = color.RGBA{0xe8, 0xe8, 0xe8, 0xff}

// bands shades the fault and pressure phases of windows (high load included) across the
// plot's height, in seconds from start.
type bands struct {
	windows []chaos.Window
	start   time.Time
}

// Plot implements plot.Plotter.
func (b *bands) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, w := range b.windows {
		if !w.Phase.Faulty() && w.Phase.Kind != chaos.HighLoad {
			continue
		}
		x0, x1 := trX(w.Start.Sub(b.start).Seconds()), trX(w.End.Sub(b.start).Seconds())
		c.FillPolygon(shade, c.ClipPolygonX([]vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}}))
	}
}

// Thumbnail implements plot.Thumbnailer: the legend's swatch.
func (b *bands) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(shade, []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}})
}
