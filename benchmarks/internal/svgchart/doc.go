// Package svgchart draws the benchmark pages' SVG charts with gonum/plot: one palette, so that a
// system keeps its color from chart to chart (switchboard's first), one font, and the legend in
// a column of its own beside the data, where it covers nothing whatever font a viewer
// substitutes.
package svgchart
