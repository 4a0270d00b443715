// Package health serves liveness and readiness probes, as Kubernetes and load balancers call
// them, for a service built on switchboard: New returns Probes whose Liveness and Readiness
// handlers run their checks concurrently, each bounded by a timeout, and answer 200 when every
// check passes and 503 otherwise, with a JSON Report naming each check, its status, duration
// and error.
//
// Readiness ("may this instance take traffic?") checks the durable queue (Config.Queue): its
// database answers, its schema has every migration this version needs, and its scheduler runs;
// and the application's own checks (Config.Checks). Liveness ("must this process be
// restarted?") checks no dependency at all: when the database is down every instance would
// fail the same check, and an orchestrator restarting all of them would cure nothing, lose
// the work in flight and add a restart storm to the outage. Only a restart can fix what
// liveness reports (Config.LivenessChecks: a deadlocked loop, a wedged worker pool).
package health
