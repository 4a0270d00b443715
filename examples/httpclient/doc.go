// Command httpclient gives a plain *http.Client retry, a circuit breaker per host and a timeout
// per attempt, by setting its Transport to httpcall.NewTransport over a mediator. It starts
// three servers on loopback and calls each: a flaky one that answers 503 with Retry-After once
// and then works (retry waits as long as the server asks), one that is down (its breaker opens
// after three failures, and the calls after that are refused at once without a request, while
// the other hosts' breakers stay closed), and a slow one (the attempt times out). For each call
// it prints what happened and the status an inbound handler would answer with.
package main
