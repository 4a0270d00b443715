// Command demo runs the main job on the embedded default: payments go through fallback, retry
// and a per-endpoint circuit breaker; what still fails is parked in a SQLite retry queue, and
// the scheduler retries it once the endpoint is back, or gives it up as a dead letter.
package main
