package svgchart

import (
	"encoding/xml"
	"fmt"
	"image/color"
	"io"
	"os"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

func init() {
	// The sans-serif face has the metrics of Arial and Helvetica, which a viewer without it
	// substitutes; the charts do not embed the font, which would make each file hundreds of
	// kilobytes.
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	plotter.DefaultFont = plot.DefaultFont
}

// palette gives the systems of a chart their colors, switchboard's first (Tableau 10).
var palette = []color.RGBA{
	{0x4e, 0x79, 0xa7, 0xff}, {0xf2, 0x8e, 0x2b, 0xff}, {0x59, 0xa1, 0x4f, 0xff}, {0xe1, 0x57, 0x59, 0xff},
	{0xb0, 0x7a, 0xa1, 0xff}, {0x76, 0xb7, 0xb2, 0xff}, {0x9c, 0x75, 0x5f, 0xff}, {0xed, 0xc9, 0x48, 0xff},
	{0xff, 0x9d, 0xa7, 0xff}, {0xba, 0xb0, 0xac, 0xff},
}

// ColorAt is the color of the i-th system of a chart.
func ColorAt(i int) color.Color { return palette[i%len(palette)] }

// NewLegend is the legend of a chart, drawn by Save: top left of its column.
func NewLegend() plot.Legend {
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.TextStyle.Font.Size = vg.Points(9)
	leg.Padding = vg.Points(3)
	return leg
}

// Save writes p as an SVG file of w by h with the legend in a column legendWidth wide on its
// right, outside the data.
func Save(p *plot.Plot, leg plot.Legend, w, h, legendWidth vg.Length, path string) error {
	return SaveRows([]*plot.Plot{p}, leg, w, h, legendWidth, path)
}

// SaveRows writes the plots one under another, each rowHeight high, as an SVG file w wide,
// with the one legend in a column legendWidth wide on the right of the first row: for a set
// of charts of the same systems, whose lines keep their colors from row to row.
func SaveRows(rows []*plot.Plot, leg plot.Legend, w, rowHeight, legendWidth vg.Length, path string) error {
	if len(rows) == 0 {
		return fmt.Errorf("svgchart: %s: no plot", path)
	}
	h := rowHeight * vg.Length(len(rows))
	c := vgsvg.New(w, h)
	dc := draw.New(c)
	for i, p := range rows {
		area := dc
		area.Max.X -= legendWidth
		area.Max.Y = h - rowHeight*vg.Length(i)
		area.Min.Y = area.Max.Y - rowHeight
		p.Draw(area)
	}
	side := dc
	side.Min.X = dc.Max.X - legendWidth + vg.Points(6)
	side.Max.Y -= vg.Points(24)
	leg.Draw(side)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Check returns an error when svg is not well-formed XML with an svg root element: what a
// page's image needs to be drawn at all.
func Check(svg string) error {
	d := xml.NewDecoder(strings.NewReader(svg))
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("not well-formed XML: %w", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		return fmt.Errorf("root element %q, want svg", root)
	}
	return nil
}
