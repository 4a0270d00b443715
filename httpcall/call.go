package httpcall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sync/atomic"

	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/mediator"
)

// Call is the request that carries one outbound HTTP request through a mediator pipeline; its
// response is the *http.Response. The Transport sends one Call per RoundTrip, so the behaviors
// that apply to *Call (retry, breaker, timeout, fallback, ...) apply to every request of the
// clients that use it. Its handler is registered by Register.
//
// A Call may also be sent directly, with mediator.Send; it is then the caller's job to mark a
// Call whose body cannot be replayed mediator.SingleAttempt, as the Transport does.
type Call struct {
	mediator.Returns[*http.Response]
	// Request is the outbound request. Its context bounds the whole call, the response body
	// included; its GetBody gives the body of every attempt after the first.
	Request *http.Request

	base     http.RoundTripper // the Transport's Config.Base; nil: the one given to Register
	key      string            // Authority's key, computed once by the Transport
	attempts atomic.Int32      // round trips started for this call
}

// Register registers the handler of *Call with m: it performs the round trip with base (nil:
// http.DefaultTransport, looked up at each call, as http.Client does) unless the Transport
// that sent the call names its own base (Config.Base). It turns a response with an error status
// into a *StatusError (see FromResponse, which closes that response's body); any other response
// is returned with its body open, for the caller to read and close.
//
// Each attempt after the first sends a fresh body from the request's GetBody. An attempt after
// the first of a request whose body cannot be replayed (Body set, GetBody nil) is refused with
// a *validation.Error, which no retry repeats and no breaker counts; the Transport marks such a
// dispatch mediator.SingleAttempt, so that retry does not ask for one.
//
// The round trip runs under the context the pipeline gives the handler (so a timeout behavior
// ends it) until the response headers have arrived; the response body then lives as long as the
// request's own context, so that the caller can read it after the pipeline's per-attempt
// contexts are gone.
//
// Like mediator.Handle, Register panics after m's Build, and a second Register is reported by
// Build as a second handler of *Call.
func Register(m *mediator.Mediator, base http.RoundTripper) {
	h := &handler{base: base}
	mediator.HandleFunc(m, h.handle)
}

// handler performs the round trips of Calls.
type handler struct{ base http.RoundTripper }

// errNoBody and errNoRequest are the validation errors of the handler: what the request is
// cannot be sent (again), and no attempt changes that.
var (
	errNoBody    = errors.New("httpcall: the request's body cannot be sent again (Body set, GetBody nil)")
	errNoRequest = errors.New("httpcall: Call without a Request")
)

func (h *handler) handle(ctx context.Context, c *Call) (*http.Response, error) {
	req := c.Request
	if req == nil || req.URL == nil {
		return nil, &validation.Error{Request: reflect.TypeFor[*Call](), Err: errNoRequest}
	}
	n := c.attempts.Add(1)
	rt := c.base
	if rt == nil {
		rt = h.base
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	var body io.ReadCloser
	if n > 1 && req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, &validation.Error{Request: reflect.TypeFor[*Call](), Err: errNoBody}
		}
		b, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("httpcall: request body for attempt %d: %w", n, err)
		}
		body = b
	}
	return roundTrip(ctx, rt, req, body)
}

// roundTrip sends req (with body, when not nil, in place of req.Body) through rt. ctx, the
// context of the attempt, bounds it until the response headers have arrived; the response body
// is bound to req's own context.
func roundTrip(ctx context.Context, rt http.RoundTripper, req *http.Request, body io.ReadCloser) (*http.Response, error) {
	if ctx.Done() == req.Context().Done() {
		// Nothing in the pipeline shortened the request's life: send it under ctx, which
		// carries the pipeline's values.
		out := req.WithContext(ctx)
		if body != nil {
			out.Body = body
		}
		resp, err := rt.RoundTrip(out)
		if err != nil {
			return nil, closedEarly(err)
		}
		if err := FromResponse(resp); err != nil {
			return nil, err
		}
		return resp, nil
	}
	// ctx ends sooner than the request (a timeout behavior): the round trip gets a context of
	// its own, with ctx's values, cancelled by ctx until the headers arrive and by the
	// request's context until the body is closed or read to its end.
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	outer := req.Context()
	stopOuter := context.AfterFunc(outer, func() { cancel(context.Cause(outer)) })
	stopAttempt := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	release := func() {
		stopOuter()
		cancel(nil)
	}
	out := req.WithContext(rctx)
	if body != nil {
		out.Body = body
	}
	resp, err := rt.RoundTrip(out)
	if err != nil {
		stopAttempt()
		release()
		return nil, closedEarly(err)
	}
	if err := FromResponse(resp); err != nil { // its body is read under the attempt's deadline
		stopAttempt()
		release()
		return nil, err
	}
	if !stopAttempt() {
		// The attempt ended as the headers arrived: the body is cut off already.
		_ = resp.Body.Close()
		release()
		return nil, context.Cause(ctx)
	}
	resp.Body = wrapBody(resp.Body, release)
	return resp, nil
}

// wrapBody returns b calling release once, when it is closed or read to its end. A body that
// can be written to (the connection of a 101 Switching Protocols response) stays writable.
func wrapBody(b io.ReadCloser, release func()) io.ReadCloser {
	rb := &releaseBody{ReadCloser: b, release: release}
	if w, ok := b.(io.Writer); ok {
		return &releaseRWBody{releaseBody: rb, w: w}
	}
	return rb
}

type releaseBody struct {
	io.ReadCloser
	once    atomic.Bool
	release func()
}

func (b *releaseBody) done() {
	if b.once.CompareAndSwap(false, true) {
		b.release()
	}
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done()
	}
	return n, err
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

type releaseRWBody struct {
	*releaseBody
	w io.Writer
}

func (b *releaseRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// closedEarly returns err, unless it is the bare io.EOF with which net/http's Transport reports
// a connection the server closed before it sent a response: that becomes errClosedEarly, which
// still matches io.EOF and also io.ErrUnexpectedEOF, so that behaviors.IsTransport recognises
// it. (http.Client wraps that io.EOF in a *url.Error, which IsTransport reads; the handler
// calls the RoundTripper directly and gets it bare, and a bare io.EOF says "end of stream" as
// often as "broken connection", so IsTransport does not take it alone.)
func closedEarly(err error) error {
	if err == io.EOF {
		return errClosedEarly{}
	}
	return err
}

// errClosedEarly reports a connection closed by the server before a response.
type errClosedEarly struct{}

func (errClosedEarly) Error() string {
	return "httpcall: the server closed the connection before a response: EOF"
}

// Is reports whether target is io.EOF, the error net/http gave, or io.ErrUnexpectedEOF, which
// is what an end of the connection before a response is to the client.
func (errClosedEarly) Is(target error) bool { return target == io.EOF || target == io.ErrUnexpectedEOF }
