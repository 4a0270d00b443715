package benchfmt

import (
	"fmt"
	"strings"
)

// The scorecard of make chaos is a section of docs/benchmarks.md that make bench does not
// measure: each command writes its own part of the page, and the markers bound the chaos
// command's, which the bench command carries over from the page it replaces.
const (
	// ChaosBegin opens the chaos command's section of the page.
	ChaosBegin = "<!-- chaos scorecard: written by make chaos (benchmarks/cmd/chaos); make bench keeps it -->"
	// ChaosEnd closes it.
	ChaosEnd = "<!-- end of the chaos scorecard -->"
)

// ChaosSection returns the chaos command's section of page, markers included, and whether the
// page has one.
func ChaosSection(page string) (string, bool) {
	i := strings.Index(page, ChaosBegin)
	if i < 0 {
		return "", false
	}
	j := strings.Index(page[i:], ChaosEnd)
	if j < 0 {
		return "", false
	}
	return page[i : i+j+len(ChaosEnd)], true
}

// ReplaceChaosSection returns page with its chaos section replaced by body between the markers.
// It is an error for page to have no section: the bench command writes one (with a note that
// make chaos has not run) on every page.
func ReplaceChaosSection(page, body string) (string, error) {
	old, ok := ChaosSection(page)
	if !ok {
		return "", fmt.Errorf("the page has no chaos section (%q … %q): regenerate it with make bench-docs", ChaosBegin, ChaosEnd)
	}
	return strings.Replace(page, old, ChaosBegin+"\n\n"+strings.TrimSpace(body)+"\n\n"+ChaosEnd, 1), nil
}
