// Package breaker holds the circuit breaker of switchboard: one breaker per key (a remote
// endpoint, or a request type by default) in a Registry, and the Behavior that gates a
// pipeline through it.
//
// A breaker is closed until FailureThreshold consecutive counted failures (or, optionally, a
// failure rate over a window) open it; an open breaker refuses calls with an *OpenError for
// the open duration, then lets HalfOpenProbes probes through; once they have all succeeded it
// closes, and any counted failure of a probe (or a hung probe) opens it again. Only failures
// the Classifier counts are counted, never those of a caller that gave up; the results of
// calls that started before a state change are ignored. A call whose own failure opened the
// breaker gets a *TrippedError, so that an outer retry stops at once.
//
// The registry serves code that calls a dependency through its own client too (Gate,
// OpenFor), lists its breakers (Snapshot, Get) for an admin API and metrics, trips and resets
// them by hand (Declare makes the keys of known endpoints trippable before any traffic), tells
// listeners about every state change (OnStateChange, AddListener) outside
// its locks, can share trip decisions through a Store, and evicts idle breakers so a registry
// of many keys stays bounded (AddEvictionListener tells what keeps something per key, such as
// a metric's series, to drop it too). KeyOf maps a request to its breaker's key.
//
// The success path through a closed breaker is lock-free and allocates nothing.
package breaker
