// Command webhooks is a webhook dispatcher on the embedded default: POST /events turns each
// event into a *Deliver request, whose handler posts it to the subscriber through an
// http.Client on httpcall's transport (retry, a circuit breaker per host, a timeout); what still
// fails is stored in a SQLite retry queue, held back by the breaker of the host it is for, and
// retried until it is delivered or its deadline makes it a dead letter. Three subscribers run
// in the program on loopback: a healthy one, one answering 503 with Retry-After in bursts, and
// one that is down. It prints what happened and serves the admin dashboard until Ctrl-C.
package main
