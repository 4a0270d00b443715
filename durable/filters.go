package durable

import (
	"fmt"
	"time"
)

// earliestFilterTime and latestFilterTime bound the times a listing's filter takes: the
// database keeps times as microseconds since 1970 in 64 bits, which a time some hundred
// thousand years away overflows (it then matched nothing, silently); no record is that old or
// that new.
var (
	earliestFilterTime = time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC)
	latestFilterTime   = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// timeRangeProblems names what is wrong with a filter's [from, to) range, each zero when not
// set; prefix starts each field's name ("Filter." in a bulk action's spec).
func timeRangeProblems(prefix string, from, to time.Time) []error {
	var errs []error
	for _, t := range []struct {
		name string
		at   time.Time
	}{{"From", from}, {"To", to}} {
		if !t.at.IsZero() && (t.at.Before(earliestFilterTime) || !t.at.Before(latestFilterTime)) {
			errs = append(errs, fmt.Errorf("%s%s %s is not between the years 1 and 9999", prefix, t.name, t.at.Format(time.RFC3339Nano)))
		}
	}
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		errs = append(errs, fmt.Errorf("%sFrom %s is not before %sTo %s: the range is empty", prefix, from.Format(time.RFC3339Nano), prefix, to.Format(time.RFC3339Nano)))
	}
	return errs
}

// problems names what is wrong with f's texts and times, as DeadLetters and StartBulkAction
// check them (each also checks the fields only it takes): a Source or ErrorContains that is not
// UTF-8, holds a NUL byte (PostgreSQL's text holds neither: the database's own error, or a
// listing of nothing) or is longer than a key, and a range as timeRangeProblems says.
func (f DeadLetterFilter) problems(prefix string) []error {
	var errs []error
	for _, t := range []struct{ name, text string }{{"Source", f.Source}, {"ErrorContains", f.ErrorContains}} {
		if err := keyProblem(prefix+t.name, t.text); err != nil {
			errs = append(errs, err)
		}
	}
	return append(errs, timeRangeProblems(prefix, f.From, f.To)...)
}
