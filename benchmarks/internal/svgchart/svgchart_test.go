package svgchart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCheckTellsAnSVGFromTheRest(t *testing.T) {
	for _, tc := range []struct{ svg, err string }{
		{`<svg xmlns="http://www.w3.org/2000/svg"><g/></svg>`, ""},
		{`<html></html>`, `root element "html"`},
		{`<svg><g></svg>`, "not well-formed"},
		{``, `root element ""`},
	} {
		err := Check(tc.svg)
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Check(%q) = %v, want %q", tc.svg, err, tc.err)
		}
	}
}

func TestSaveRowsDrawsEveryRowAndTheLegendOnce(t *testing.T) {
	leg := NewLegend()
	var rows []*plot.Plot
	for i, title := range []string{"first row", "second row"} {
		p := plot.New()
		p.Title.Text = title
		line, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 1}, {X: 1, Y: 2}})
		if err != nil {
			t.Fatal(err)
		}
		line.Color = ColorAt(i)
		p.Add(line)
		if i == 0 {
			leg.Add("a system", line)
		}
		rows = append(rows, p)
	}
	path := filepath.Join(t.TempDir(), "rows.svg")
	if err := SaveRows(rows, leg, 10*vg.Centimeter, 4*vg.Centimeter, 3*vg.Centimeter, path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	if err := Check(svg); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"first row", "second row", "a system", `height="226.77pt"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %q", want)
		}
	}
	if n := strings.Count(svg, "a system"); n != 1 {
		t.Errorf("the legend drawn %d times, want once", n)
	}
	if err := SaveRows(nil, leg, 1, 1, 1, path); err == nil {
		t.Error("SaveRows of no plot: no error")
	}
}
