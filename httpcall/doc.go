// Package httpcall is the HTTP edge of a switchboard pipeline: an http.RoundTripper that sends
// every outbound request through a mediator as a *Call, so that an http.Client gets the
// pipeline's fallback, retry, circuit breaker and timeout with one line:
//
//	httpcall.Register(m, nil) // the handler of *Call: the round trip itself
//	m.Use(retry.New(...))     // the behaviors, as for any request type
//	...
//	client := &http.Client{Transport: httpcall.NewTransport(m, httpcall.Config{})}
//
// The handler turns a response whose status says the server failed (408, 429, 5xx) into a
// *StatusError, which carries the status code and the server's Retry-After, so the default
// classifiers of package behaviors understand it without configuration: retry retries 429,
// 502, 503 and 504 and honours Retry-After, a breaker counts it. Transport errors (refused,
// reset, unexpected EOF) and timeouts are recognised by behaviors.IsTransport and
// behaviors.IsTimeout, and retried when the retry policy says RetryOnTransport or
// RetryOnTimeout. FromResponse makes the same error from a response for code that uses an
// http.Client of its own.
//
// Authority keys a breaker (or a bulkhead) by the request's scheme, host and port, so a
// failing host opens its own breaker and no other; AuthorityOf gives the same key for a URL,
// for a key function outside the pipeline of *Call (a durable registration's).
//
// On the inbound side, WriteError answers a net/http request with what the error of the Send
// that served it says (202 Accepted for a request a durable deferral stored, 422 for a
// validation error, 503 with Retry-After for an open breaker, 504 for a timeout, nothing for a
// client that has gone), and StatusOf gives that status and its headers alone.
//
// Bodies: an attempt after the first sends a fresh body from the request's GetBody; a request
// whose body cannot be replayed is sent at most once. A response turned into an error has its
// body read, drained and closed by the handler; any other response's body is the caller's to
// read and close, and lives as long as the request's context. The cancellation of the
// request's context is the caller's: never retried, never counted by a breaker.
//
// docs/http.md says where the transport sits in a client and what is retried.
package httpcall
