package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// printer writes a command's result: a table, or with --json the JSON it was given.
type printer struct {
	w    io.Writer
	json bool
}

// rawJSON prints an answer of the API, indented.
func (p *printer) rawJSON(raw []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := p.w.Write(b.Bytes())
	return err
}

// value prints v as indented JSON: the result of a command that is not one answer of the API.
func (p *printer) value(v any) error {
	enc := json.NewEncoder(p.w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints rows under header (none when nil), aligned; with no row, it prints none (the
// header alone says the list is empty).
func (p *printer) table(header []string, rows [][]string) error {
	return writeTable(p.w, header, rows)
}

func writeTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if header != nil {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, r := range rows {
		for i := range r {
			r[i] = cell(r[i])
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// fields prints name-value pairs, aligned: the detail of one item, letter or breaker.
func (p *printer) fields(pairs ...string) error {
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(tw, "%s:\t%s\n", pairs[i], flat(pairs[i+1]))
	}
	return tw.Flush()
}

// line prints one line of text.
func (p *printer) line(format string, args ...any) {
	fmt.Fprintf(p.w, format+"\n", args...)
}

// maxCell is the longest cell of a table: an error message of a kilobyte would push the
// columns after it off the screen; show and --json give it whole.
const maxCell = 80

// flat puts s on one line, "-" when empty.
func flat(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	return s
}

// cell makes s fit a table's cell: one line, at most maxCell runes, "-" when empty.
func cell(s string) string {
	s = flat(s)
	if r := []rune(s); len(r) > maxCell {
		return string(r[:maxCell-1]) + "…"
	}
	return s
}

// when renders a time of the API in UTC to the second, or "" for none.
func when(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// dur renders milliseconds as a duration.
func dur(ms int64) string {
	if ms <= 0 {
		return ""
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second / 10).String()
}

// payloadOf returns the payload of the object under key of an answer, as compact JSON, or ""
// when it has none.
func payloadOf(raw []byte, key string) string {
	var ans map[string]json.RawMessage
	var obj struct {
		Payload json.RawMessage `json:"payload"`
	}
	if json.Unmarshal(raw, &ans) != nil || json.Unmarshal(ans[key], &obj) != nil || len(obj.Payload) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, obj.Payload) != nil {
		return string(obj.Payload)
	}
	return b.String()
}
