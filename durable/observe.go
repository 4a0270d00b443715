package durable

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// noteClaim tells Config.OnClaim about a claiming round trip.
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

// notifySettled tells Config.OnSettled about the completions of batch the store took.
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

// settledOutcome names how c ended, for Config.OnSettled.
func settledOutcome(c store.Completion) record.Settled {
	switch {
	case c.Expired:
		return record.SettledExpired
	case c.Paused:
		return record.SettledPaused
	case c.Limited:
		return record.SettledLimited
	case c.Refused:
		return record.SettledRefused
	case c.State == store.StateSucceeded:
		return record.SettledSucceeded
	case c.State == store.StateDead:
		return record.SettledDead
	case c.Outcome == store.OutcomeInterrupted:
		return record.SettledInterrupted
	case c.Outcome == store.OutcomeFailed:
		return record.SettledRetried
	}
	return record.SettledReleased
}
