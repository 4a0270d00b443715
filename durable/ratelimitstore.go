package durable

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// RateLimitStoreConfig configures NewRateLimitStore. Its zero value takes the defaults.
type RateLimitStoreConfig struct {
	// Name is the namespace of the limits: the limiters of a fleet that share a set of limits
	// use stores of the same name, and one queue may hold several sets. Default "default".
	Name string
	// LeasePeriod is how far ahead of the database's now permits are leased. It bounds what
	// an instance's crash costs (the permits it leased and did not use pass unused, at most a
	// period of them) and so how soon the others take its share; the limiter leases up to a
	// quarter period's permits at a time (its instance's demand over that time), while its
	// permits last less than three quarters of a period, so a period is also the lead that
	// keeps calls from waiting on the database. Default 500 ms: a crash
	// costs at most half a second of the limit, a database slow for a few hundred
	// milliseconds costs nothing, and a busy key takes about eight leases a second across the
	// fleet (and the attempts of the instances that find the period leased already). At least
	// 10 ms.
	LeasePeriod time.Duration
	// Timeout bounds every database call of the store; a call that takes longer, or fails,
	// makes the limiter fall back to its share of the limit until a lease succeeds again.
	// Default 1 s: the leases run in the background, ahead of demand, so a database slower
	// than usual (a busy host) costs nothing while a lease still comes back within the
	// permits in hand (they last about three quarters of LeasePeriod, 375 ms at the
	// default), whereas each fallback and return costs up to a lease period of the instance's
	// permits (see ratelimit.Config.Store). A database that does not answer at all (frozen)
	// costs more: the permits in hand run out before the Timeout ends, and until the
	// fallback's share starts (after the Timeout and one more LeasePeriod) the instance gets
	// no permits; at the defaults about a second of the limit is lost. A shorter Timeout
	// (not under LeasePeriod/2, to ride out an ordinary slow moment) loses less of it then.
	Timeout time.Duration
	// Instance names this instance to the other lessees of a limit, which count each other to
	// know their share. Default: the host name, the process id and a random suffix. The
	// store's log lines give it as "lessee"; their "instance" is the queue's
	// Config.InstanceID, as in the queue's own lines.
	Instance string
	// Logger receives the store's database failures, rate-limited: the first at once, then
	// at most one line every 30 s while they go on, and one when the database answers again;
	// and one line when the instances fall back to their shares. Default: the queue's
	// Config.Logger, so a store made from a queue logs where it does.
	Logger *zap.Logger
}

// Validate reports every field with an invalid value.
func (c RateLimitStoreConfig) Validate() error {
	_, err := c.withDefaults()
	return err
}

func (c RateLimitStoreConfig) withDefaults() (RateLimitStoreConfig, error) {
	var errs []error
	switch {
	case !utf8.ValidString(c.Name) || strings.IndexByte(c.Name, 0) >= 0:
		errs = append(errs, fmt.Errorf("Name %q is not valid UTF-8 without NUL bytes", c.Name))
	case len(c.Name) > maxBreakerStoreName:
		errs = append(errs, fmt.Errorf("Name is %d bytes long, longer than %d", len(c.Name), maxBreakerStoreName))
	}
	if c.LeasePeriod < 0 || (c.LeasePeriod > 0 && c.LeasePeriod < 10*time.Millisecond) {
		errs = append(errs, fmt.Errorf("LeasePeriod %v is under 10ms", c.LeasePeriod))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("Timeout %v is negative", c.Timeout))
	}
	if !utf8.ValidString(c.Instance) || strings.IndexByte(c.Instance, 0) >= 0 {
		errs = append(errs, fmt.Errorf("Instance %q is not valid UTF-8 without NUL bytes", c.Instance))
	}
	if c.Name == "" {
		c.Name = "default"
	}
	if c.LeasePeriod == 0 {
		c.LeasePeriod = 500 * time.Millisecond
	}
	if c.Timeout == 0 {
		c.Timeout = time.Second
	}
	if c.Instance == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.Instance = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if c.Logger == nil {
		c.Logger = zap.L()
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("durable: RateLimitStoreConfig: %w", errors.Join(errs...))
	}
	return c, nil
}

// Lessees: an instance says it leases a key at most once a lessSeen; it counts the instances
// seen within lesseesLive as sharing the key; it deletes those not seen for lesseesPrune, at
// most once a lesseesPrune.
const (
	lesseeEvery  = time.Second
	lesseesLive  = 3 * time.Second
	lesseesPrune = 10 * time.Minute
)

// RateLimitStore keeps the limits that a fleet's rate limiters share in a queue's database
// (the tables switchboard_rate_limits and switchboard_rate_limit_lessees), on SQLite and on
// PostgreSQL: it is a ratelimit.PermitStore, given to ratelimit.Config.Store. NewRateLimitStore makes
// one.
//
// Each limit is one row holding the time of its next free permit, by the database's clock. A
// lease of n permits is one conditional UPDATE … RETURNING that advances it by n intervals,
// if the last of them comes within LeasePeriod of the database's now: every permit of the
// limit's timeline goes to one instance once, so the fleet together keeps to the limit
// whichever instances join, leave or crash. Besides the leases, about once a second while it
// leases a key, the instance records itself as a lessee of the key and counts the others (two
// statements; a third, every ten minutes, deletes the lessees long gone): that count is its
// divisor when the database does not answer and it keeps to its share of the limit.
//
// The row holds no rate: each lease advances it by its own request's interval and takes its
// burst from the request too (ratelimit.LeaseRequest, the key's rate and burst as the
// limiter's Config gives them, its own in Limits or LimitFor, or the default). So the keys of
// one store each keep their own rate, and a rate changed between deployments needs nothing
// migrated: the first lease at the new rate takes the timeline on from the last permit leased
// at the old one (at most a LeasePeriod ahead), at its own spacing. While a deployment is
// under way and the instances lease one key at two rates, each permit takes its own interval
// of the timeline: the fleet keeps to a rate between the two (weighted by the permits each
// side leases), never above the higher; and each instance, should the database not answer,
// keeps to its share of the rate it was given.
type RateLimitStore struct {
	st     driver.FleetStores
	cfg    RateLimitStoreConfig
	health dbhealth.Health

	away atomic.Bool // the last call failed

	mu      sync.Mutex
	lessees map[string]*lessee

	statements atomic.Int64 // for the tests
}

type lessee struct {
	count    int
	seen     time.Time // when this instance last said it leases the key (local clock)
	pruned   time.Time
	counting bool
}

var _ ratelimit.PermitStore = (*RateLimitStore)(nil)

// NewRateLimitStore returns the store of the shared rate limits of q's database named
// cfg.Name. Give each limiter (ratelimit.Config.Store) of each instance a store; the instances
// that share limits use the same Name. It makes no database call until the first lease.
func NewRateLimitStore(q *Queue, cfg RateLimitStoreConfig) (*RateLimitStore, error) {
	if q == nil {
		return nil, errors.New("durable: NewRateLimitStore: the queue is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = q.log // the store is the queue's: its lines go where the queue's go
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	fs, err := fleetStoresOf(q.store, "NewRateLimitStore")
	if err != nil {
		return nil, err
	}
	// Its lines name the instance as the queue's do (Config.InstanceID, when set), and the
	// lessee, which is the store's own, under a key of its own.
	fields := []zap.Field{zap.String("rate_limit_store", cfg.Name), zap.String("lessee", cfg.Instance)}
	if id := q.schedCfg.InstanceID; id != "" {
		fields = append(fields, zap.String("instance", id))
	}
	log := cfg.Logger.With(fields...)
	return &RateLimitStore{st: fs, cfg: cfg, health: dbhealth.Health{Log: log}, lessees: map[string]*lessee{}}, nil
}

// LeasePeriod implements ratelimit.PermitStore: RateLimitStoreConfig.LeasePeriod.
func (s *RateLimitStore) LeasePeriod() time.Duration { return s.cfg.LeasePeriod }

// Lease implements ratelimit.PermitStore: one statement (two the first time a limit is leased),
// and about once a second per key two more that count the lessees; bounded by Timeout (and
// ctx). A count that fails is logged and the lease returned with the last count known.
func (s *RateLimitStore) Lease(ctx context.Context, r ratelimit.LeaseRequest) (ratelimit.Lease, error) {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	s.statements.Add(1)
	g, err := s.st.LeaseRateLimit(cctx, store.RateLimitLease{Name: s.cfg.Name, Key: r.Key, Interval: r.Interval, Burst: r.Burst,
		Permits: r.Permits, Horizon: s.cfg.LeasePeriod})
	if err != nil {
		return ratelimit.Lease{}, s.failed(ctx, err)
	}
	n, err := s.instances(cctx, r.Key)
	if err != nil && ctx.Err() == nil {
		// The row has moved on already: the lease is the instance's whatever the count, which
		// keeps the last one known.
		s.health.Failed("rate limit store: count lessees", fmt.Errorf("durable: rate limit store %q: %w", s.cfg.Name, err))
	}
	if s.away.Swap(false) {
		s.health.OK()
		s.health.Log.Info("durable: rate limit store answers again; the instances lease the fleet's permits again")
	}
	return ratelimit.Lease{Permits: g.Permits, First: g.First, Next: g.Next, Now: g.Now, Instances: n}, nil
}

// instances returns the number of instances leasing key, asking the database about once a
// lesseeEvery; when the database fails to say, the last count known (1 at first) and the error.
func (s *RateLimitStore) instances(ctx context.Context, key string) (int, error) {
	now := time.Now()
	s.mu.Lock()
	l := s.lessees[key]
	if l == nil {
		l = &lessee{count: 1}
		s.lessees[key] = l
	}
	if now.Sub(l.seen) < lesseeEvery || l.counting {
		n := l.count
		s.mu.Unlock()
		return n, nil
	}
	l.counting = true
	prune := l.pruned.IsZero() || now.Sub(l.pruned) >= lesseesPrune
	s.mu.Unlock()
	var after time.Duration
	if prune {
		after = lesseesPrune
		s.statements.Add(1)
	}
	s.statements.Add(2)
	n, err := s.st.RateLimitLessees(ctx, s.cfg.Name, key, s.cfg.Instance, lesseesLive, after)
	s.mu.Lock()
	defer s.mu.Unlock()
	l.counting = false
	l.seen = now // after a failure too: the next count is tried in a lesseeEvery
	if err != nil {
		return l.count, err
	}
	l.count = max(n, 1)
	if prune {
		l.pruned = now
	}
	return l.count, nil
}

// failed logs a failed call (rate-limited) and says so once when the store goes away.
func (s *RateLimitStore) failed(ctx context.Context, err error) error {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("durable: rate limit store %q: the database did not answer within the Timeout (%v): %w", s.cfg.Name, s.cfg.Timeout, err)
	} else {
		err = fmt.Errorf("durable: rate limit store %q: %w", s.cfg.Name, err)
	}
	if ctx.Err() != nil {
		return err
	}
	if !s.away.Swap(true) {
		s.health.Log.Warn("durable: rate limit store unreachable; each instance keeps to its share of the limits until it answers",
			zap.Error(err))
	}
	s.health.Failed("rate limit store: lease", err)
	return err
}
