package logging

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

// OnStateChange implements breaker.Observer: it writes a "switchboard: circuit breaker
// state changed" entry with breaker (its key), from, to and reason. An opening is written
// at warn (a dependency failed enough to be cut off, and calls are refused until it
// recovers); a breaker half-opening or closing again at info. Attach the behavior once to
// the mediator (mediator.Mediator.Observe) for it to hear the breakers of its pipelines and
// of a durable queue started with it.
func (b *Behavior) OnStateChange(c breaker.StateChange) {
	level := zapcore.InfoLevel
	if c.To == breaker.StateOpen {
		level = zapcore.WarnLevel
	}
	ce := b.log.Check(level, "switchboard: circuit breaker state changed")
	if ce == nil {
		return
	}
	ce.Write(zap.String("breaker", c.Key), zap.String("from", c.From.String()), zap.String("to", c.To.String()),
		zap.String("reason", c.Reason.String()))
}
