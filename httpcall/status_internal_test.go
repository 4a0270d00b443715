package httpcall

import (
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		value string
		want  time.Duration
		ok    bool
	}{
		{"seconds", "1", time.Second, true},
		{"zero seconds", "0", 0, true},
		{"seconds with blanks", " 120 ", 2 * time.Minute, true},
		{"HTTP-date", "Sun, 01 Mar 2026 12:00:30 GMT", 30 * time.Second, true},
		{"RFC 850 date", "Sunday, 01-Mar-26 12:01:00 GMT", time.Minute, true},
		{"asctime date", "Sun Mar  1 12:00:05 2026", 5 * time.Second, true},
		{"past date", "Sun, 01 Mar 2026 11:59:00 GMT", 0, true},
		{"date beyond a day", "Tue, 03 Mar 2026 12:00:00 GMT", maxHint, true},
		{"huge seconds", "31536000", maxHint, true},
		{"seconds beyond uint64", "99999999999999999999999", maxHint, true},
		{"empty", "", 0, false},
		{"negative", "-1", 0, false},
		{"fraction", "1.5", 0, false},
		{"seconds and text", "10 seconds", 0, false},
		{"garbage", "soon", 0, false},
		{"RFC 3339 is not an HTTP-date", "2026-03-01T12:00:30Z", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseRetryAfter(tc.value, now)
			if got != tc.want || ok != tc.ok {
				t.Errorf("parseRetryAfter(%q) = %s, %v; want %s, %v", tc.value, got, ok, tc.want, tc.ok)
			}
		})
	}
}
