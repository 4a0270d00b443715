// Command custombehavior writes a pipeline behavior of its own, an audit of every attempt, and
// places it by stage and order between the built-in retry and circuit breaker behaviors: inside
// retry, so it runs once per attempt and knows the attempt's number; outside the breaker, so it
// also sees the attempts the breaker refuses. A second behavior in the pre stage logs each call
// once, however many attempts it takes. The program prints the composed pipeline, then three
// calls to a rates service that times out, fails and goes down, with the audit's line for each
// attempt.
package main
