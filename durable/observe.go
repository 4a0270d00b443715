package durable

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// noteClaim tells SchedulerConfig.OnClaim about a claiming round trip.
func (s *scheduler) noteClaim(took time.Duration, claimed int, err error) {
	if len(s.cfg.OnClaim) == 0 {
		return
	}
	for _, on := range s.cfg.OnClaim {
		func() {
			defer func() {
				if p := recover(); p != nil {
					s.cfg.Logger.Error("durable: OnClaim panicked", zap.String("panic", fmt.Sprint(p)))
				}
			}()
			on(took, claimed, err)
		}()
	}
}

// notifySettled tells SchedulerConfig.OnSettled about the completions of batch the store took.
func (s *scheduler) notifySettled(batch []store.Completion, results []error) {
	if len(s.cfg.OnSettled) == 0 {
		return
	}
	for i, c := range batch {
		if results[i] != nil {
			continue
		}
		outcome := settledOutcome(c)
		for _, on := range s.cfg.OnSettled {
			func() {
				defer func() {
					if p := recover(); p != nil {
						s.cfg.Logger.Error("durable: OnSettled panicked", zap.String("panic", fmt.Sprint(p)))
					}
				}()
				on(c.Name, outcome)
			}()
		}
	}
}

// settledOutcome names how c ended, for SchedulerConfig.OnSettled.
func settledOutcome(c store.Completion) string {
	switch {
	case c.Expired:
		return string(record.OutcomeExpired)
	case c.Paused:
		return outcomePaused
	case c.Limited:
		return outcomeLimited
	case c.Refused:
		return string(record.OutcomeRefused)
	case c.State == store.StateSucceeded:
		return string(record.OutcomeSucceeded)
	case c.State == store.StateDead:
		return "dead"
	case c.Outcome == store.OutcomeInterrupted:
		return string(record.OutcomeInterrupted)
	case c.Outcome == store.OutcomeFailed:
		return "retried"
	}
	return "released"
}

// outcomePaused is the OnSettled outcome of an item parked on a paused breaker key, as
// SchedulerConfig.OnSettled documents it (and metrics.Recorder.OnSettled counts it): no
// record.Outcome, as no attempt was made and none is logged.
const outcomePaused = "paused"
