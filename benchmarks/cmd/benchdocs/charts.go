package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/switchboard-go/switchboard/benchmarks/internal/benchfmt"
	"github.com/switchboard-go/switchboard/benchmarks/internal/svgchart"
)

// charts are the files writeCharts wrote, by chart; empty when a chart had no data.
type charts struct {
	inProcess string
	drains    []drainChart
}

type drainChart struct{ title, file string }

// writeCharts writes the SVG charts of r into dir.
func writeCharts(r *benchfmt.Results, dir string) (charts, error) {
	var c charts
	if p, leg, height := inProcessChart(r); p != nil {
		c.inProcess = "inprocess.svg"
		if err := svgchart.Save(p, leg, 20*vg.Centimeter, height, 4.5*vg.Centimeter, filepath.Join(dir, c.inProcess)); err != nil {
			return c, err
		}
	}
	for _, e := range benchfmt.Engines {
		for _, h := range benchfmt.Handlers {
			title := e + ", " + h.Label
			p, leg := drainPlot(r, e, h.Name, title)
			if p == nil {
				continue
			}
			file := fmt.Sprintf("drain-%s-%s.svg", e, h.Name)
			if err := svgchart.Save(p, leg, 15*vg.Centimeter, 8*vg.Centimeter, 3*vg.Centimeter, filepath.Join(dir, file)); err != nil {
				return c, err
			}
			c.drains = append(c.drains, drainChart{title, file})
		}
	}
	return c, nil
}

// inProcessChart is the horizontal bar chart of the in-process cases: a group of bars per
// case under its label, one bar per system, ns per call on a log scale (the cases span three
// orders of magnitude); its legend and height; nil when r has none of the cases.
func inProcessChart(r *benchfmt.Results) (*plot.Plot, plot.Legend, vg.Length) {
	type bar struct {
		system string
		v      float64
	}
	var groups [][]bar
	var names []string
	for _, c := range benchfmt.InProcess {
		var g []bar
		for _, s := range append([]benchfmt.System{c.Switchboard}, c.Peers...) {
			if v, ok := r.Get(s.Bench, "ns/op"); ok && v > 0 {
				g = append(g, bar{s.Label, v})
			}
		}
		if len(g) > 1 {
			groups = append(groups, g)
			names = append(names, label(c.Label))
		}
	}
	leg := svgchart.NewLegend()
	if len(groups) == 0 {
		return nil, leg, 0
	}
	p := plot.New()
	p.Title.Text = "In process: ns per call, log scale (shorter is less time)"
	p.X.Label.Text = "ns per call"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.HideY()
	small := p.X.Tick.Label
	small.Font.Size = vg.Points(7)
	caption := p.X.Tick.Label
	caption.Font.Size = vg.Points(9)
	series := map[string]*hbars{}
	var order []string
	labels := &captions{style: caption}
	lo, hi, nbars := math.Inf(1), 0.0, 0
	for i, g := range groups {
		// The first case at the top: group i spans [n-1-i, n-i), its label over its bars.
		top := float64(len(groups) - i)
		labels.items = append(labels.items, caption1{y: top - 0.02, text: names[i]})
		step := 0.62 / float64(len(g))
		for j, b := range g {
			s := series[b.system]
			if s == nil {
				s = &hbars{color: svgchart.ColorAt(len(series)), style: small}
				series[b.system] = s
				order = append(order, b.system)
			}
			s.bars = append(s.bars, hbar{y: top - 0.3 - (float64(j)+0.5)*step, v: b.v, h: step * 0.85})
			lo, hi = min(lo, b.v), max(hi, b.v)
			nbars++
		}
	}
	for _, name := range order {
		p.Add(series[name])
		leg.Add(name, series[name])
	}
	p.Add(labels)
	// Whole decades around the figures, the one on the right for the figures printed at the
	// bars' ends.
	p.X.Min = math.Pow(10, math.Floor(math.Log10(lo)))
	p.X.Max = math.Pow(10, math.Ceil(math.Log10(hi))+0.5)
	p.Y.Min, p.Y.Max = 0, float64(len(groups))
	return p, leg, vg.Length(nbars)*10*vg.Points(1) + vg.Length(len(groups))*14*vg.Points(1) + 3*vg.Centimeter
}

// hbar is one horizontal bar: its centre on the y axis, its value and its height, in data units.
type hbar struct{ y, v, h float64 }

// hbars are the bars of one system, drawn from the left edge of the plot (a log axis has no
// zero) to their value, each with its figure at its end.
type hbars struct {
	color color.Color
	style draw.TextStyle
	bars  []hbar
}

// Plot implements plot.Plotter.
func (b *hbars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := b.style
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
	for _, bar := range b.bars {
		x0, x1 := c.Min.X, trX(bar.v)
		y0, y1 := trY(bar.y-bar.h/2), trY(bar.y+bar.h/2)
		c.FillPolygon(b.color, c.ClipPolygonXY([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}))
		c.FillText(sty, vg.Point{X: x1 + vg.Points(2), Y: trY(bar.y)}, benchfmt.Number(bar.v))
	}
}

// DataRange implements plot.DataRanger.
func (b *hbars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, bar := range b.bars {
		xmin, xmax = min(xmin, bar.v), max(xmax, bar.v)
		ymin, ymax = min(ymin, bar.y-bar.h/2), max(ymax, bar.y+bar.h/2)
	}
	return xmin, xmax, ymin, ymax
}

// Thumbnail implements plot.Thumbnailer: the legend's swatch.
func (b *hbars) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(b.color, []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}})
}

// captions are the cases' labels, each at the left edge above its group of bars.
type captions struct {
	style draw.TextStyle
	items []caption1
}

type caption1 struct {
	y    float64
	text string
}

// Plot implements plot.Plotter.
func (l *captions) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	sty := l.style
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YTop
	for _, it := range l.items {
		c.FillText(sty, vg.Point{X: c.Min.X + vg.Points(2), Y: trY(it.y)}, it.text)
	}
}

// drainPlot is the chart of one engine and handler, items/s by worker count with a line per
// system, and its legend; nil when r has no drain of them.
func drainPlot(r *benchfmt.Results, engine, handler, title string) (*plot.Plot, plot.Legend) {
	leg := svgchart.NewLegend()
	p := plot.New()
	p.Title.Text = title + ": items/s"
	p.X.Label.Text = "workers"
	p.Y.Label.Text = "items/s (higher is faster)"
	p.X.Scale = plot.LogScale{}
	var ticks plot.ConstantTicks
	for _, n := range benchfmt.Workers {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	p.X.Tick.Marker = ticks
	drawn, top := false, 0.0
	for i, s := range benchfmt.DrainSystems {
		var xys plotter.XYs
		for _, n := range benchfmt.Workers {
			if v, ok := r.Get(benchfmt.DrainName(engine, handler, n, s.Name), "items/s"); ok {
				xys = append(xys, plotter.XY{X: float64(n), Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		for _, xy := range xys {
			top = max(top, xy.Y)
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			continue
		}
		line.Color, points.Color = svgchart.ColorAt(i), svgchart.ColorAt(i)
		line.Width = vg.Points(1.5)
		points.Shape = draw.CircleGlyph{}
		points.Radius = vg.Points(2.5)
		p.Add(line, points)
		leg.Add(s.Label, line, points)
		drawn = true
	}
	if !drawn {
		return nil, leg
	}
	p.X.Min, p.X.Max = 0.8, 40
	// From zero, so that the lines' heights compare, with room above the highest point.
	p.Y.Min, p.Y.Max = 0, top*1.1
	return p, leg
}
