// Command demo runs the main job on the embedded default: an outbound dispatcher sending a
// stream of typed requests to five HTTP endpoints it starts on loopback — one steady, one slow,
// one failing in bursts with 503 and Retry-After, one resetting connections, one down for a
// while and then back.
//
// Each request goes through the pipeline: a Quote (a read) falls back to the last rate seen; a
// Deliver that still fails is deferred into a SQLite retry queue; every HTTP call, through
// httpcall's transport, is retried, guarded by its endpoint's circuit breaker and bounded per
// attempt. Deferred deliveries wait, parked and uncharged, on their endpoint's breaker; one that
// waits too long becomes a dead letter, and once the outage is over the demo replays half of
// them and leaves the rest for the dashboard.
//
// While it runs it serves the admin dashboard, /metrics and the health probes (URL and token
// printed), writes zap logs to a file it names and traces every request; at the end it prints
// what became of every request and checks that each is accounted for:
//
//	go run ./examples/demo                    # a minute, then the dashboard until Ctrl-C
//	go run ./examples/demo -duration 20s -quit
package main
