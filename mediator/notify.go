package mediator

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"
)

// PublishStrategy is how Publish delivers a notification to its handlers. The zero PublishStrategy means the
// mediator's default (see Config.PublishStrategy).
type PublishStrategy struct {
	kind  strategyKind
	limit int
}

type strategyKind uint8

const (
	strategyDefault strategyKind = iota
	strategyStop
	strategyJoin
	strategyParallel
	strategyDetached
)

var (
	// StopOnFirstError calls handlers one after another in registration order and returns the
	// first error; later handlers are not called.
	StopOnFirstError = PublishStrategy{kind: strategyStop}
	// ContinueOnError calls every handler one after another and returns their errors joined
	// with errors.Join. It stops early only when ctx is done.
	ContinueOnError = PublishStrategy{kind: strategyJoin}
	// FireAndForget starts every handler on its own goroutine and returns at once. Handlers get
	// a context detached from the caller's cancellation (its values stay) that Close cancels if
	// its deadline passes; their errors go to the error sink. Close waits for them.
	FireAndForget = PublishStrategy{kind: strategyDetached}
)

// Parallel calls the handlers concurrently, at most limit at a time (limit <= 0: all at once),
// waits for all of them and returns their errors joined.
func Parallel(limit int) PublishStrategy {
	return PublishStrategy{kind: strategyParallel, limit: limit}
}

func (s PublishStrategy) String() string {
	switch s.kind {
	case strategyStop:
		return "stop-on-first-error"
	case strategyJoin:
		return "continue-on-error"
	case strategyParallel:
		return "parallel"
	case strategyDetached:
		return "fire-and-forget"
	}
	return "default"
}

// Publish delivers n to every handler of notification type N using the publisher's default
// strategy.
func Publish[N any](ctx context.Context, p Publisher, n N) error {
	return p.PublishAny(ctx, n, PublishStrategy{})
}

// PublishWith delivers n using strategy s for this call only.
func PublishWith[N any](ctx context.Context, p Publisher, n N, s PublishStrategy) error {
	return p.PublishAny(ctx, n, s)
}

// PublishAny implements Publisher.
func (m *Mediator) PublishAny(ctx context.Context, n any, s PublishStrategy) error {
	t := m.table.Load()
	if t == nil {
		return ErrNotBuilt
	}
	if n == nil {
		return ErrNilRequest
	}
	if ctx == nil || ctx.Err() != nil {
		return doneErr(ctx)
	}
	calls, _ := t.notifs.get(typeKey(n))
	if len(calls) == 0 {
		if m.config.RequireNotificationHandlers {
			return noHandler(n, "notification")
		}
		return nil
	}
	if s.kind == strategyDefault {
		s = m.config.PublishStrategy
	}
	switch s.kind {
	case strategyJoin:
		var errs []error
		for _, c := range calls {
			if err := ctx.Err(); err != nil {
				errs = append(errs, err)
				break
			}
			if err := c(ctx, n); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	case strategyParallel:
		return publishParallel(ctx, calls, n, s.limit)
	case strategyDetached:
		return m.publishDetached(ctx, calls, n)
	default:
		for _, c := range calls {
			if err := c(ctx, n); err != nil {
				return err
			}
		}
		return nil
	}
}

func publishParallel(ctx context.Context, calls []notifCall, n any, limit int) error {
	if limit <= 0 || limit > len(calls) {
		limit = len(calls)
	}
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
	for i, c := range calls {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = c(ctx, n)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sinkError calls one ErrorSink observer, recovering and logging its panic so that the next
// one is called and the process goes on.
func (m *Mediator) sinkError(sink func(context.Context, any, error), ctx context.Context, n any, err error) {
	defer func() {
		if p := recover(); p != nil {
			m.config.Logger.Error("mediator: ErrorSink panicked", zap.String("notification", fmt.Sprintf("%T", n)),
				zap.Error(err), zap.String("panic", fmt.Sprint(p)))
		}
	}()
	sink(ctx, n, err)
}

func (m *Mediator) publishDetached(ctx context.Context, calls []notifCall, n any) error {
	m.closeMu.RLock()
	defer m.closeMu.RUnlock()
	if m.closed {
		return ErrClosed
	}
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(m.life, cancel)
	var left sync.WaitGroup
	for _, c := range calls {
		m.inflight.Add(1)
		m.running.Add(1)
		left.Add(1)
		go func() {
			defer m.inflight.Done()
			defer m.running.Add(-1)
			defer left.Done()
			if err := c(dctx, n); err != nil {
				for _, sink := range m.config.ErrorSink {
					m.sinkError(sink, dctx, n, err)
				}
			}
		}()
	}
	m.inflight.Add(1)
	go func() {
		defer m.inflight.Done()
		left.Wait()
		stop()
		cancel()
	}()
	return nil
}

// Close stops fire-and-forget publishing (later ones fail with ErrClosed) and waits for every
// fire-and-forget handler still running. It is Shutdown without a deadline.
func (m *Mediator) Close() error { return m.Shutdown(context.Background()) }

// Shutdown is Close with a deadline: when ctx is done before the handlers finish, their
// contexts are cancelled and Shutdown still waits for them to return, then reports ctx's
// error. When no handler is running, it returns nil even if ctx is already done (such as the
// signal context that started the shutdown). No goroutine started by the mediator outlives
// Shutdown. Calling it again is safe.
func (m *Mediator) Shutdown(ctx context.Context) error {
	m.closeMu.Lock()
	m.closed = true
	m.closeMu.Unlock()
	done := make(chan struct{})
	go func() {
		m.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
		m.endLife()
		return nil
	case <-ctx.Done():
		if m.running.Load() == 0 { // nothing to cut short: only bookkeeping is left
			<-done
			m.endLife()
			return nil
		}
		m.endLife()
		<-done
		return ctx.Err()
	}
}

func notifTerminal[N any](h NotificationHandler[N]) notifCall {
	return func(ctx context.Context, n any) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = NewPanicError(p)
			}
		}()
		return h.Handle(ctx, n.(N))
	}
}
