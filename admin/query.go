package admin

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxListed is how many problems an error answer lists before it counts the rest: enough to
// fix a request, few enough that a request with thousands of bad parameters gets a short
// answer.
const maxListed = 5

// maxQuoted bounds a value a message quotes back (a parameter's name or value, a path
// segment): its first runes identify it.
const maxQuoted = 64

// quote quotes s for a message, cut to maxQuoted runes.
func quote(s string) string {
	if n := 0; len(s) > maxQuoted {
		for i := range s {
			if n == maxQuoted {
				return strconv.Quote(s[:i]) + fmt.Sprintf("… (%d bytes)", len(s))
			}
			n++
		}
	}
	return strconv.Quote(s)
}

// maxText bounds the text of a filter or a name a request gives (a source, an error's part, a
// request name or key, a schedule's name): what every listing, key and name the queue keeps
// fits in, well under what SQLite's LIKE takes as a pattern.
const maxText = 1024

// badText names what is wrong with the text v a request gives as what (a field or parameter,
// as the message calls it), or returns nil: not valid UTF-8 or holding a NUL byte (PostgreSQL's
// text holds neither: the database refused it and the request answered 500), or longer than
// maxText. Empty text is for the caller to judge.
func badText(what, v string) error {
	switch {
	case !utf8.ValidString(v):
		return fmt.Errorf("%s %s is not valid UTF-8", what, quote(v))
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%s %s holds a NUL byte", what, quote(v))
	case len(v) > maxText:
		return fmt.Errorf("%s is %d bytes, more than %d", what, len(v), maxText)
	}
	return nil
}

// badTexts is badText of each pair of what and v, the problems found.
func badTexts(pairs ...string) []error {
	var errs []error
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := badText(pairs[i], pairs[i+1]); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// joinAtMost joins errs as errors.Join does, listing the first maxListed and counting the
// others.
func joinAtMost(errs []error) error {
	if len(errs) <= maxListed {
		return errors.Join(errs...)
	}
	return errors.Join(append(slices.Clip(errs[:maxListed]), fmt.Errorf("and %d more problems with the query", len(errs)-maxListed))...)
}

// query parses r's query and checks that it names only known parameters, each once. A query
// net/url cannot parse (a bad escape, a semicolon, more parameters than it reads) is refused
// rather than read in part: r.URL.Query() would drop what it could not parse, and with it
// the filters. On failure it has answered 400 and returns false.
func query(w http.ResponseWriter, r *http.Request, known ...string) (url.Values, bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		msg := "the query cannot be parsed: " + err.Error()
		if n := strings.Count(r.URL.RawQuery, "&") + 1; n > defaultMaxParams {
			msg += fmt.Sprintf(" (it has %d parameters; net/url reads at most %d unless GODEBUG urlmaxqueryparams says otherwise)", n, defaultMaxParams)
		}
		writeError(w, http.StatusBadRequest, msg+"; nothing was read")
		return nil, false
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(known, name) && len(known) == 0:
			errs = append(errs, fmt.Errorf("unknown query parameter %s: this route takes none", quote(name)))
		case !slices.Contains(known, name):
			// A misspelt filter would otherwise be ignored and show what was not asked for.
			errs = append(errs, fmt.Errorf("unknown query parameter %s: want %s", quote(name), orList(known)))
		case len(q[name]) > 1:
			errs = append(errs, fmt.Errorf("query parameter %q is given %d times: give it once", name, len(q[name])))
		}
	}
	if len(errs) > 0 {
		writeError(w, http.StatusBadRequest, joinAtMost(errs).Error())
		return nil, false
	}
	return q, true
}

// defaultMaxParams is the number of query parameters net/url parses by default.
const defaultMaxParams = 10_000

// orList is "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// intParam reads the integer query parameter name, absent meaning 0; it must be at least
// minimum and, when maximum >= 0, at most maximum.
func intParam(q url.Values, name string, minimum, maximum int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%s %s: the number is past what an integer holds", name, quote(v))
	}
	if err != nil || n < minimum || (maximum >= 0 && n > maximum) {
		if maximum >= 0 {
			return 0, fmt.Errorf("%s %s: want an integer from %d to %d", name, quote(v), minimum, maximum)
		}
		return 0, fmt.Errorf("%s %s: want an integer of at least %d", name, quote(v), minimum)
	}
	return n, nil
}

// timeRange reads the query parameters from and to (RFC 3339 times, absent meaning zero) into
// from and to, and returns the problems: a value that is not a time, an empty range.
func timeRange(q url.Values, from, to *time.Time) []error {
	var errs []error
	for _, t := range []struct {
		name string
		to   *time.Time
	}{{"from", from}, {"to", to}} {
		if v := q.Get(t.name); v != "" {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: want an RFC 3339 time such as 2026-01-02T15:04:05Z", t.name, quote(v)))
			}
			*t.to = at
		}
	}
	if !from.IsZero() && !to.IsZero() && !from.Before(*to) {
		errs = append(errs, fmt.Errorf("from %s is not before to %s: the range is empty", from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano)))
	}
	return errs
}

// filterOf reads a listing's query: its parameter names checked by query, its values by
// parse. On failure it has answered 400, naming every problem, and returns false.
func filterOf[F any](w http.ResponseWriter, r *http.Request, parse func(url.Values) (F, error), known ...string) (F, bool) {
	q, ok := query(w, r, known...)
	if !ok {
		var zero F
		return zero, false
	}
	f, err := parse(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return f, false
	}
	return f, true
}
