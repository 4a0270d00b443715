package httpcall_test

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/httpcall"
)

// trackedBody is a response body that records whether it was closed and how much was read.
type trackedBody struct {
	r      io.Reader
	read   int
	closed bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func (b *trackedBody) Close() error { b.closed = true; return nil }

func response(code int, header http.Header, body string) (*http.Response, *trackedBody) {
	u, _ := url.Parse("https://user:secret@API.example.com/quotes/7?key=abc#top")
	b := &trackedBody{r: strings.NewReader(body)}
	if header == nil {
		header = http.Header{}
	}
	return &http.Response{
		StatusCode: code,
		Status:     http.StatusText(code),
		Header:     header,
		Body:       b,
		Request:    &http.Request{Method: http.MethodPost, URL: u},
	}, b
}

func TestFromResponseLeavesAnswersAlone(t *testing.T) {
	for _, code := range []int{100, 200, 204, 301, 304, 400, 401, 403, 404, 409, 422} {
		resp, body := response(code, nil, "answer")
		if err := httpcall.FromResponse(resp); err != nil {
			t.Errorf("FromResponse(%d) = %v, want nil", code, err)
		}
		if body.read != 0 || body.closed {
			t.Errorf("FromResponse(%d) touched the body (read %d, closed %v)", code, body.read, body.closed)
		}
	}
	if err := httpcall.FromResponse(nil); err != nil {
		t.Errorf("FromResponse(nil) = %v", err)
	}
}

func TestFromResponseErrors(t *testing.T) {
	for _, code := range []int{408, 429, 500, 501, 502, 503, 504, 599} {
		resp, body := response(code, http.Header{"Retry-After": {"7"}}, `{"title":"down"}`)
		err := httpcall.FromResponse(resp)
		se, ok := errors.AsType[*httpcall.StatusError](err)
		if !ok {
			t.Fatalf("FromResponse(%d) = %v, want a *StatusError", code, err)
		}
		if !body.closed {
			t.Errorf("%d: body not closed", code)
		}
		if se.Code != code || se.StatusCode() != code || se.Method != "POST" || string(se.Body) != `{"title":"down"}` {
			t.Errorf("%d: %+v", code, se)
		}
		if se.URL != "https://API.example.com/quotes/7" {
			t.Errorf("URL %q still carries user information, query or fragment", se.URL)
		}
		if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "abc") || strings.Contains(err.Error(), "down") {
			t.Errorf("message %q carries a secret or the body", err)
		}
		if !errors.Is(err, httpcall.ErrStatus) {
			t.Errorf("%v does not match ErrStatus", err)
		}
		if got := behaviors.RetryAfter(err); got != 7*time.Second {
			t.Errorf("behaviors.RetryAfter = %s, want 7s", got)
		}
		wantRetried := code == 429 || code == 502 || code == 503 || code == 504
		if got := behaviors.Retryable(err); got != wantRetried {
			t.Errorf("behaviors.Retryable(%d) = %v, want %v", code, got, wantRetried)
		}
		if !breaker.CountsAsFailure(err) {
			t.Errorf("breaker.CountsAsFailure(%d) = false", code)
		}
	}
	resp, _ := response(503, nil, "")
	resp.Status = "503 Service Unavailable"
	if got, want := httpcall.FromResponse(resp).Error(), "httpcall: POST https://API.example.com/quotes/7: 503 Service Unavailable"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

func TestFromResponseKeepsTheBeginningOfALongBody(t *testing.T) {
	resp, body := response(503, nil, strings.Repeat("x", 1<<20))
	se, _ := errors.AsType[*httpcall.StatusError](httpcall.FromResponse(resp))
	if len(se.Body) != 4<<10 {
		t.Errorf("kept %d bytes, want 4 KiB", len(se.Body))
	}
	if body.read > 4<<10+64<<10 || !body.closed {
		t.Errorf("read %d bytes of a 1 MiB body (closed %v); want at most 68 KiB and closed", body.read, body.closed)
	}
}

func TestFromResponseMeasuresRetryAfterFromDate(t *testing.T) {
	// The server's clock is an hour behind ours: its Date says when it answered.
	date := time.Now().Add(-time.Hour).UTC()
	resp, _ := response(503, http.Header{
		"Date":        {date.Format(http.TimeFormat)},
		"Retry-After": {date.Add(90 * time.Second).Format(http.TimeFormat)},
	}, "")
	if got := behaviors.RetryAfter(httpcall.FromResponse(resp)); got != 90*time.Second {
		t.Errorf("RetryAfter = %s, want 90s", got)
	}
	resp, _ = response(503, http.Header{"Retry-After": {"soon"}}, "")
	if got := behaviors.RetryAfter(httpcall.FromResponse(resp)); got != 0 {
		t.Errorf("RetryAfter of garbage = %s, want 0", got)
	}
}

type other struct{}

func TestAuthority(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"https://API.Example.com/quotes?key=1", "https://api.example.com:443"},
		{"HTTP://api.example.com", "http://api.example.com:80"},
		{"http://api.example.com:8080/x", "http://api.example.com:8080"},
		{"https://user:secret@api.example.com:443/", "https://api.example.com:443"},
		{"http://[::1]/", "http://[::1]:80"},
		{"http://[::1]:9000/", "http://[::1]:9000"},
		{"ftp://files.example.com/a", "ftp://files.example.com"},
	} {
		req, err := http.NewRequest(http.MethodGet, tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := httpcall.Authority(&httpcall.Call{Request: req}); got != tc.want {
			t.Errorf("Authority(%s) = %q, want %q", tc.url, got, tc.want)
		}
	}
	if got := httpcall.Authority(&other{}); got != "*httpcall_test.other" {
		t.Errorf("Authority of another request = %q, want its type key", got)
	}
	if got := httpcall.Authority(&httpcall.Call{}); got != "" {
		t.Errorf("Authority of a Call without a request = %q", got)
	}
}
