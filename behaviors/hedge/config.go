package hedge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/budget"
)

// Defaults of Config's zero fields.
const (
	// DefaultMaxHedges is one hedge per call: it removes most of a slow tail (the chance that
	// two independent attempts are both slow is the square of one being slow) for at most one
	// extra request per call, as the hedged requests of "The Tail at Scale" do.
	DefaultMaxHedges = 1
	// DefaultMinSamples is the number of successful calls of a key the percentile delay waits
	// for: with fewer, a high percentile is little more than the largest sample.
	DefaultMinSamples = 100
	// DefaultMaxKeys bounds the keys the behavior keeps statistics and a latency sketch for
	// (each about 600 bytes), as the metrics bound their series.
	DefaultMaxKeys = 1000
)

// maxHedges bounds Config.MaxHedges: beyond a few, hedges multiply a slow dependency's load
// for little gain.
const maxHedges = 16

// OverflowKey is the key under which the calls of keys beyond Config.MaxKeys are counted and
// measured together (in Behavior.Snapshot and in the Notices).
const OverflowKey = "_overflow" // as metrics.OverflowKey, so a hedge key and a metrics series overflow under one name

// Phase says what a Notice reports.
type Phase uint8

const (
	// Sent: a hedge (Notice.Attempt 1, 2, ...) was sent, Notice.Delay after the call began
	// or after the hedge before it.
	Sent Phase = iota + 1
	// Refused: a hedge was refused (Notice.Err is the refusal), by the retry budget before it
	// was sent, or at once by the pipeline inside (behaviors.Refused: an open breaker, a rate
	// limit), after its Sent; the call waits for the attempts that are running and sends no
	// more hedges.
	Refused
	// Won: Notice.Attempt succeeded first in a call that sent at least one hedge (0 is the
	// primary attempt).
	Won
	// Cancelled: Notice.Attempt was still running when another attempt won, and its context
	// was cancelled; its result is discarded. (When the caller goes away, its cancellation
	// reaches every attempt, and no Cancelled is reported.)
	Cancelled
)

// String names the step: "sent", "refused", "won" or "cancelled".
func (s Phase) String() string {
	switch s {
	case Sent:
		return "sent"
	case Refused:
		return "refused"
	case Won:
		return "won"
	case Cancelled:
		return "cancelled"
	}
	return fmt.Sprintf("Phase(%d)", uint8(s))
}

// Notice describes one step of a hedged call, for the observers of Config.OnHedge.
type Notice struct {
	// Phase is what happened.
	Phase Phase
	// Request is the request of the call.
	Request any
	// Key is the request's key (Config.Key), or OverflowKey.
	Key string
	// Attempt is the attempt the step is about: 0 for the primary, 1 for the first hedge, ...
	// For Refused, the hedge that was not sent.
	Attempt int
	// Delay is the hedge delay of the call (Sent and Refused).
	Delay time.Duration
	// Err is the refusal (Refused): the budget's, or the pipeline's.
	Err error
}

// Config configures New.
type Config struct {
	// Delay is how long a call runs before a hedge is sent; with Percentile, the delay used
	// until a key has MinSamples successful calls. Required: no delay suits every dependency
	// (a good one is a little above the dependency's usual latency), so a zero Delay is an
	// error from Validate.
	Delay time.Duration
	// Percentile, when set, makes the delay of a key the given percentile (such as 95) of the
	// durations of its recent successful attempts (about the last 1,000), measured with a
	// bounded latency sketch per key, rounded up to its bucket (at most 25 % more), so that
	// only the calls slower than most are hedged. The winning attempt of each call is
	// measured; the attempts that lost are not, so the sketch leans towards the faster
	// answers. Zero: the fixed Delay.
	Percentile float64
	// MinSamples is the number of successful attempts of a key the percentile needs before it
	// replaces Delay (it is refreshed every 16 samples). Zero: DefaultMinSamples. Only with
	// Percentile.
	MinSamples int
	// MaxHedges is how many hedges a call may send, each Delay after the one before while no
	// attempt has succeeded; at most 16. Zero: DefaultMaxHedges.
	MaxHedges int
	// Budget, when set, is asked before every hedge (budget.Budget.Retry; the call is counted
	// once by budget.Budget.Count, unless a retry behavior outside counted it already, when
	// its first hedge is asked for or when the primary returns, not when the primary was
	// refused at once, so that refused calls grow no allowance): a refused hedge is not sent,
	// no more are sent, and the call waits for the attempts that are running. A hedge the
	// pipeline inside refuses at once (an open breaker, a rate limit) is given back
	// (budget.Budget.Refund), as is one the call no longer wanted once the budget allowed it. Hedges then share the budget with retries (give retry.Config.Budget the
	// same one), so that together they stay within the budget's ratio of the calls. nil:
	// hedges are bounded by MaxHedges alone.
	Budget *budget.Budget
	// Key maps a request to the key whose statistics and latency sketch it uses (an
	// endpoint). nil: one per request type (behaviors.TypeKey), resolved at Build.
	Key behaviors.KeyFunc
	// MaxKeys bounds the keys of Key kept apart; the calls of the keys beyond it share
	// OverflowKey. Zero: DefaultMaxKeys.
	MaxKeys int
	// OnHedge are the observers of this behavior's hedged calls' steps (see Phase), called
	// before the mediator's observers (Observer; tracing attaches one with
	// mediator.Mediator.Observe, while metrics read Behavior.Snapshot, see
	// metrics.Recorder.CollectHedges). Sent and Refused are
	// called on the goroutine of the timer that sends the hedge, Won and Cancelled on the
	// caller's, before the call returns. A call that ends before its delay calls none.
	OnHedge []func(ctx context.Context, n Notice)
	// Clock is the time source of the delays and the latency measurements. nil:
	// behaviors.SystemClock, whose timers run the hedge without a waiting goroutine; another
	// clock costs one goroutine per call that waits on its timer.
	Clock behaviors.Clock
}

// Validate reports every problem of c, each naming its field.
func (c Config) Validate() error {
	var errs []error
	if c.Delay <= 0 {
		errs = append(errs, fmt.Errorf("hedge Delay %s is not positive: it is required (with Percentile, it is the delay until enough samples)", c.Delay))
	}
	if c.Percentile < 0 || c.Percentile >= 100 || c.Percentile != c.Percentile {
		errs = append(errs, fmt.Errorf("hedge Percentile %v is not in (0, 100)", c.Percentile))
	}
	if c.MinSamples < 0 {
		errs = append(errs, fmt.Errorf("hedge MinSamples %d is negative", c.MinSamples))
	}
	if c.MinSamples > window/2 {
		errs = append(errs, fmt.Errorf("hedge MinSamples %d is more than %d: the sketch keeps about the last %d samples", c.MinSamples, window/2, window))
	}
	if c.MinSamples != 0 && c.Percentile == 0 {
		errs = append(errs, errors.New("hedge MinSamples is set but Percentile is zero: it would never apply"))
	}
	if c.MaxHedges < 0 || c.MaxHedges > maxHedges {
		errs = append(errs, fmt.Errorf("hedge MaxHedges %d is not in [0, %d]: each hedge is a full extra request", c.MaxHedges, maxHedges))
	}
	if c.MaxKeys < 0 {
		errs = append(errs, fmt.Errorf("hedge MaxKeys %d is negative", c.MaxKeys))
	}
	return errors.Join(errs...)
}
