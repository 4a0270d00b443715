package httpcall

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/validation"
)

// Accepted is implemented by an error that says a request did not fail but was accepted to be
// done later: *durable.DeferredError, the answer of a durable queue's deferral, implements it.
// StatusOf answers it 202 Accepted and WriteError writes its AcceptedID, so a client can ask
// about the work later. Declared here so that an HTTP handler answers a deferral without
// package httpcall importing the queue.
type Accepted interface {
	error
	// AcceptedID names the accepted work, such as a durable item's id in decimal.
	AcceptedID() string
}

// callType is the type of the requests the handler of Register serves.
var callType = reflect.TypeFor[*Call]()

// StatusOf returns the HTTP status, and the headers, that answer a net/http request whose
// handler's Send returned err; 0 and nil for a nil err. The header is nil when the answer has
// none. WriteError writes this answer with a JSON body; StatusOf is for a handler that writes
// its own body. The first of these that err says decides:
//
//   - 202 Accepted: an Accepted error in err's chain (a durable deferral stored the request for
//     later): the request did not fail.
//   - 422 Unprocessable Entity: a validation error (validation.ErrInvalid), the client's to
//     fix. A validation error of an outbound *Call (a body that cannot be sent again) is the
//     server's, not the client's, and is answered as any other failure.
//   - 503 Service Unavailable: the call was cancelled, while the client still waited (work
//     cancelled at shutdown, say; when the client itself is gone there is nothing to answer,
//     and WriteError writes nothing).
//   - 503 Service Unavailable: a refusal (behaviors.IsRefusal: an open circuit breaker, a full
//     bulkhead, an inner request's included), or a failure that says when to try again
//     (behaviors.RetryAfter: a call whose own failure opened its breaker, a server's
//     Retry-After). With a Retry-After header when err carries that hint, in whole seconds
//     rounded up (at least 1): the breaker's remaining open time, so the client comes back
//     when a probe may go through, not before.
//   - 504 Gateway Timeout: a timeout (behaviors.IsTimeout: the timeout behavior's, a passed
//     deadline that was not the client's).
//   - 500 Internal Server Error: anything else, mediator.ErrNoHandler included.
func StatusOf(err error) (code int, header http.Header) {
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, new(Accepted)):
		return http.StatusAccepted, nil
	case invalid(err):
		return http.StatusUnprocessableEntity, nil
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, nil
	case behaviors.IsRefusal(err) || behaviors.RetryAfter(err) > 0:
		if d := behaviors.RetryAfter(err); d > 0 {
			return http.StatusServiceUnavailable, http.Header{"Retry-After": {retryAfterSeconds(d)}}
		}
		return http.StatusServiceUnavailable, nil
	case behaviors.IsTimeout(err):
		return http.StatusGatewayTimeout, nil
	}
	return http.StatusInternalServerError, nil
}

// WriteError writes to w the answer StatusOf gives err, with a small JSON body, and reports
// whether it wrote one. A handler that sent a request through the mediator calls it with
// Send's error and returns when it reports true:
//
//	id, err := mediator.Send(r.Context(), m, &Deliver{...})
//	if httpcall.WriteError(w, r, err) {
//		return
//	}
//	// err was nil: answer with id
//
// It writes nothing and reports false when err is nil, and when r's context is done: the
// client cancelled its request or went away, and is not there to read an answer. (net/http
// answers a handler that wrote nothing 200 OK, on a connection nobody reads; a handler that
// logs statuses may record that case as it sees fit.)
//
// The body is {"id":"…"} for 202 Accepted (the Accepted error's AcceptedID) and
// {"error":"…"} otherwise. Only 422 shows an error's text, the validator's message, since
// the client must know what to fix; every other status has its standard text ("Service
// Unavailable"), never the error's, which may carry a downstream's answer, a URL or an
// internal detail. The Content-Type is application/json, with X-Content-Type-Options nosniff
// as http.Error sets it; the headers w already has are kept.
func WriteError(w http.ResponseWriter, r *http.Request, err error) bool {
	if err == nil || r.Context().Err() != nil {
		return false
	}
	code, header := StatusOf(err)
	var body any
	switch code {
	case http.StatusAccepted:
		var a Accepted
		errors.As(err, &a)
		body = struct {
			ID string `json:"id"`
		}{a.AcceptedID()}
	case http.StatusUnprocessableEntity:
		body = errorBody{invalidMessage(err)}
	default:
		body = errorBody{http.StatusText(code)}
	}
	b, _ := json.Marshal(body) // strings only: it cannot fail
	h := w.Header()
	for k, v := range header {
		h[k] = v
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
	return true
}

// errorBody is the JSON body of an answer that is not 202.
type errorBody struct {
	Error string `json:"error"`
}

// invalid reports whether err says the client's request is invalid: a validation error that
// is not the one of an outbound *Call.
func invalid(err error) bool {
	if v, ok := errors.AsType[*validation.Error](err); ok {
		return v.Request != callType
	}
	return errors.Is(err, validation.ErrInvalid)
}

// invalidMessage is the text of a 422 answer: the validator's message, or a generic one when
// err carries none of its own (a bare validation.ErrInvalid).
func invalidMessage(err error) string {
	if v, ok := errors.AsType[*validation.Error](err); ok && v.Err != nil {
		return v.Err.Error()
	}
	return "invalid request"
}

// retryAfterSeconds formats d as a Retry-After value: whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := (d + time.Second - 1) / time.Second
	return strconv.FormatInt(int64(max(s, 1)), 10)
}
