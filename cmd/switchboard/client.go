package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// client calls the admin API at base with the bearer token.
type client struct {
	base    string // the mount, without a trailing slash
	token   string
	timeout time.Duration // of each request
	http    *http.Client
}

// maxAnswerBytes bounds an answer read: the API's largest (a page of 500 items) is far below.
const maxAnswerBytes = 64 << 20

// apiError is an answer of the admin API that is not a success: its status and the message of
// its {"error": ...} body.
type apiError struct {
	method, path string
	status       int
	msg          string
	body         []byte // the answer, JSON
}

func (e *apiError) Error() string {
	if e.status == http.StatusUnauthorized || e.status == http.StatusForbidden {
		return fmt.Sprintf("the admin API refused the token (%d): %s", e.status, e.msg)
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.method, e.path, e.status, http.StatusText(e.status), e.msg)
}

// call sends method path (under the mount, with query) with body as JSON (none when nil) and
// returns the answer's JSON; on a success it decodes it into out too (when not nil). An
// answer of another status is an *apiError; an address that does not answer, or answers
// something that is not the admin API, is an error naming the address.
func (c *client) call(ctx context.Context, method, path string, query url.Values, body, out any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("the admin API address %q: %w", c.base, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, c.unreachable(ctx, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxAnswerBytes))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s %s: %w", method, target, c.unreachable(ctx, err))
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "application/json" || !json.Valid(raw) {
		if res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden {
			return nil, fmt.Errorf("%s refused %s %s with %s before the admin API could judge the token: a proxy in front of it wants credentials of its own, or %s is not the address the admin handler is mounted at",
				c.base, method, path, describe(res), c.base)
		}
		return nil, fmt.Errorf("%s answered %s %s with %s, not the admin API's JSON: is %s the address the admin handler is mounted at (its dashboard's)?",
			c.base, method, path, describe(res), c.base)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(raw))
		}
		return raw, &apiError{method: method, path: path, status: res.StatusCode, msg: e.Error, body: raw}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, fmt.Errorf("the answer of %s %s is not what this version of the tool reads: %w", method, path, err)
		}
	}
	return raw, nil
}

// unreachable explains a request that got no answer: the caller's cancellation (Ctrl-C) as
// such, a timeout naming the flag, any other error naming the address.
func (c *client) unreachable(ctx context.Context, err error) error {
	switch {
	case context.Cause(ctx) != nil && errors.Is(context.Cause(ctx), context.Canceled):
		return fmt.Errorf("interrupted: %w", context.Canceled)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("the admin API at %s did not answer within %v (--timeout)", c.base, c.timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("cannot reach the admin API at %s: %v", c.base, err)
}

// describe names an answer that is not the API's: its status and content type.
func describe(res *http.Response) string {
	ct := res.Header.Get("Content-Type")
	if ct == "" {
		ct = "no content type"
	}
	return fmt.Sprintf("%d %s (%s)", res.StatusCode, http.StatusText(res.StatusCode), ct)
}

// get calls GET path and decodes the answer into out.
func (c *client) get(ctx context.Context, path string, query url.Values, out any) ([]byte, error) {
	return c.call(ctx, http.MethodGet, path, query, nil, out)
}

// post calls POST path with body (none when nil) and decodes the answer into out.
func (c *client) post(ctx context.Context, path string, body, out any) ([]byte, error) {
	return c.call(ctx, http.MethodPost, path, nil, body, out)
}

// seg escapes one path segment: a breaker key or schedule name may hold a / or a ?.
func seg(s string) string { return url.PathEscape(s) }
