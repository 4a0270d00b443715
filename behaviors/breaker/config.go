package breaker

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
)

// Config configures the breakers of a Registry. Every zero field means its default, and each
// field's comment gives the reason for it.
type Config struct {
	// Key maps a request to its breaker's key, for example the remote endpoint it calls, so
	// that one failing endpoint does not stop the calls to the others. nil: one breaker per
	// request type, keyed by behaviors.TypeKey and bound once at Build, because a request
	// type usually names one dependency. KeyOf applies it.
	Key behaviors.KeyFunc
	// FailureThreshold is the number of consecutive counted failures that opens a closed
	// breaker. Default 5: five failures in a row are rarely bad luck, and few enough that
	// callers soon stop waiting on a dependency that is down.
	FailureThreshold int
	// OpenDuration is how long an open breaker refuses calls before it lets a probe through.
	// Default 30 s: long enough for a restarting instance or a failover to complete, short
	// enough that a recovered dependency is soon used again.
	OpenDuration time.Duration
	// OpenJitter spreads each open duration uniformly by ±OpenJitter × OpenDuration, so that
	// a fleet tripped at once does not probe at once. A fraction in [0, 1). Default 0: none.
	OpenJitter float64
	// HalfOpenProbes is K, the number of probe calls a half-open breaker lets through in
	// total, and the number that must succeed to close it. Any counted failure of a probe opens
	// the breaker again at once, with a fresh open duration; the other probes' outcomes are
	// then ignored. A probe whose outcome is not counted (the Classifier says no, or it was released
	// or panicked) frees its slot for another probe; a successful one keeps its slot, so at
	// most K probes reach the dependency in one half-open period. Default 1: one call tells
	// whether the dependency is back and puts the least load on one that is not. A larger K
	// (resilience4j's permitted calls in half-open state) gives a surer verdict at the cost of
	// more calls to a dependency that may still be down.
	HalfOpenProbes int
	// ProbeTimeout is how long a probe may run before the breaker gives up on it: a probe
	// still running then counts as failed, and the breaker opens again for a fresh open
	// duration; the probe's own result, when it comes, is ignored. Default 30 s, the default
	// open duration: a probe slower than that is as good as failed for the callers waiting
	// behind the breaker. It does not follow a configured OpenDuration.
	//
	// Set it above the dependency's slowest normal latency. A ProbeTimeout shorter than that
	// keeps a breaker opening again after every probe, even once the dependency has
	// recovered: each probe succeeds, too late. Such re-opens have StateChange.Reason
	// ReasonProbeTimedOut, and OnLateProbe hears how long each late probe took.
	ProbeTimeout time.Duration
	// FailureRate opens a closed breaker when, within RateWindow, at least RateMinCalls calls
	// were made and at least this fraction of them failed; in (0, 1]. It works alongside
	// FailureThreshold. Default 0: off. When on, successful calls are counted too, which
	// costs a lock and a clock read per success.
	FailureRate float64
	// RateWindow is the sliding window of FailureRate. Default 60 s: long enough to smooth
	// out a burst, short enough to forget an outage that is over.
	RateWindow time.Duration
	// RateMinCalls is the minimum number of calls in the window before FailureRate applies.
	// Default 10: fewer calls say too little to judge a rate by.
	RateMinCalls int
	// Classifier decides which errors count as failures. Default CountsAsFailure: everything
	// but validation errors, missing handlers, refusals (circuit-open errors, bulkhead
	// rejections) and 4xx status codes other than 408 and 429, which say nothing about the
	// dependency's health. Whatever it says, the error of a call whose context is done is
	// never counted: the caller gave up, and clients report that in their own ways (a gRPC
	// Canceled status, a driver's connection error), not always as context.Canceled. Nor is a
	// refusal (behaviors.IsRefusal, a refusing behavior of your own included): the call did
	// not reach the dependency.
	Classifier behaviors.Classifier
	// MaxBreakers bounds the number of breakers held. Past it, a sweep evicts the breakers
	// unused since the previous sweep that have nothing left to decide: closed ones, open ones
	// whose open time has passed and half-open ones with no probe in flight. So the registry
	// holds at most 1.25 × MaxBreakers breakers plus those still inside their open duration or
	// with a probe in flight; once its open time has passed, an open breaker goes like an idle
	// closed one. Breakers bound to a request type are never evicted. A call after an eviction
	// finds a new, closed breaker. Evicted breakers, up to half of MaxBreakers and a few per
	// shard of the registry's map, are kept for the keys that come next, so that a registry
	// past its bound makes a new breaker without allocating. Default 10,000: enough for the endpoints of a large fleet, and a few MiB at
	// most. Negative means no bound.
	MaxBreakers int
	// IdleTTL evicts breakers unused for at least this long that have nothing left to decide,
	// as MaxBreakers does. It is checked when a new key arrives and by Sweep. Default 10
	// minutes: the failure streak of a breaker unused for that long says little about the
	// dependency now. Negative means never.
	IdleTTL time.Duration
	// OnStateChange are the observers called after every state change, in the order listed
	// and then the listeners AddListener added, in the order added; outside the breaker's
	// lock, so they may call the registry. The changes of one breaker are announced one at a
	// time, in the order they happened: usually by the goroutine that made the change, but a
	// change made while an earlier one is still being announced is announced after it, by the
	// goroutine announcing. They are this registry's own, called before the mediators'
	// observers (Observer): observers of every behavior attach once, with
	// mediator.Mediator.Observe. Empty: nothing is called.
	OnStateChange []func(StateChange)
	// Store shares the breakers' state with the other registries that use it: the instances
	// of a fleet, and this one after a restart (durable.NewBreakerStore keeps it in the queue's
	// database). Every transition is decided once for all of them: a trip by one opens the
	// breaker everywhere, one instance holds a half-open breaker's probes while the others
	// keep refusing, and a reset anywhere closes it everywhere. The closed path makes no store
	// call, nor does a call an open breaker refuses: the store hears transitions only, and a
	// registry learns of the others' within the store's refresh interval. A store that cannot
	// be reached leaves the registry on its own state until it answers (see StoreTimeout).
	// NewRegistry loads the fleet's open breakers from it, waiting at most StoreTimeout. Give
	// each registry a store of its own: a store need not tell a registry the changes another
	// registry made through the same store. nil: the state stays in this process.
	Store Store
	// StoreTimeout bounds each call of Store, so a call that trips a breaker or claims its
	// probes never waits longer on a store that hangs; past it the registry goes on with its
	// local decision, takes the store to be away (the transitions until the next retry, every
	// four timeouts and at least every second, do not wait for it at all), and publishes what
	// the store missed once it answers again. A claim of the probes past it is refused instead,
	// as it may commit all the same: the registry looks the breaker up (Load, in the
	// background, bounded by StoreTimeout too) and follows what the store holds, its own claim
	// included; only when that gets no answer either does the next call probe on its own.
	// Default 250 ms: a local
	// database answers in about a millisecond, and a caller hardly notices a quarter second
	// once per transition.
	StoreTimeout time.Duration
	// Instance names this registry to the Store: the holder of a half-open breaker's probes,
	// and who made each transition. It is a name for people: a registry knows its claims of
	// the probes by a token of each claim, so two registries, or a process and its restart,
	// under one name never take each other's claims for their own. Default: the host name,
	// the process id and a random suffix, unique per registry.
	Instance string
	// OnStoreError are the observers of the errors of Store, called in the order listed, by
	// the goroutine whose call met the error or by the registry's own retry: calls may come
	// from several goroutines at once, so an observer must be safe for concurrent use. The
	// calls skipped while the store is taken to be away are not reported. Empty: the errors
	// are dropped.
	OnStoreError []func(error)
	// OnLateProbe is called when a probe reports its outcome after ProbeTimeout. By then the
	// breaker has given up on the probe and opened again (with ReasonProbeTimedOut, unless
	// another probe's failure, Trip, Reset or Apply changed its state first), so the outcome
	// is ignored. It is called outside the breaker's lock, by the goroutine reporting, so it
	// may call the registry.
	// Probes that keep arriving late mean ProbeTimeout is shorter than the dependency's
	// latency, for example:
	//
	//	OnLateProbe: []func(breaker.LateProbe){func(l breaker.LateProbe) {
	//		logger.Warn("breaker probe too slow", zap.String("key", l.Key), zap.Duration("took", l.Took), zap.Duration("ProbeTimeout", l.Timeout))
	//	}},
	//
	// A released probe (one that panicked, or was abandoned) is not reported. The observers
	// are called in the order listed. Empty: nothing is called.
	OnLateProbe []func(LateProbe)
	// OnRefusal are the observers called with the key of a breaker each time it refuses a call
	// (an *OpenError, through the Behavior or Gate), in the order listed, outside the breaker's
	// lock, by the goroutine refused, so they may call the registry; keep them cheap, as every
	// refused call makes one call of each. They are called before the mediators' observers
	// (RefusalObserver; metrics.Recorder counts refusals so). Empty: nothing is called.
	OnRefusal []func(key string)
	// Clock is the registry's time source. nil: behaviors.SystemClock.
	Clock behaviors.Clock
}

// Validate reports fields set to invalid values, each naming its field; zero fields are valid.
func (c Config) Validate() error {
	var errs []error
	if c.FailureThreshold < 0 {
		errs = append(errs, fmt.Errorf("FailureThreshold %d is negative", c.FailureThreshold))
	}
	if c.OpenDuration < 0 || c.ProbeTimeout < 0 || c.RateWindow < 0 {
		errs = append(errs, errors.New("OpenDuration, ProbeTimeout and RateWindow must not be negative"))
	}
	if !(c.OpenJitter >= 0 && c.OpenJitter < 1) {
		errs = append(errs, fmt.Errorf("OpenJitter %v is not in [0, 1)", c.OpenJitter))
	}
	if c.HalfOpenProbes < 0 {
		errs = append(errs, fmt.Errorf("HalfOpenProbes %d is negative", c.HalfOpenProbes))
	}
	if !(c.FailureRate >= 0 && c.FailureRate <= 1) {
		errs = append(errs, fmt.Errorf("FailureRate %v is not in [0, 1]", c.FailureRate))
	}
	if c.RateMinCalls < 0 {
		errs = append(errs, fmt.Errorf("RateMinCalls %d is negative", c.RateMinCalls))
	}
	if c.StoreTimeout < 0 {
		errs = append(errs, fmt.Errorf("StoreTimeout %v is negative", c.StoreTimeout))
	}
	return errors.Join(errs...)
}
