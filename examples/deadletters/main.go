package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// SyncInvoice books one invoice in the ledger. The ledger books an invoice number once, however
// often it is sent, so the request is safe to retry, to defer and to replay.
type SyncInvoice struct {
	mediator.Command
	Number   string `json:"number"`
	Currency string `json:"currency"`
	Cents    int    `json:"cents"`
}

// unavailableError is the rates service failing: its 503 is retryable for the durable queue's
// default classification, so the request that met it is deferred and retried.
type unavailableError struct{ currency string }

func (e *unavailableError) Error() string {
	return "rates service: no rate for " + e.currency + " (503 Service Unavailable)"
}

func (e *unavailableError) StatusCode() int { return 503 }

// ledger stands for the downstream system: it converts each invoice through a rates service
// that fails for the currencies in broken and, once each, for those in blip.
type ledger struct {
	mu     sync.Mutex
	broken map[string]bool
	blip   map[string]bool
	booked map[string]bool // the invoice numbers booked: booking one again changes nothing
	calls  int
}

func (l *ledger) book(inv *SyncInvoice) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.broken[inv.Currency] {
		return &unavailableError{inv.Currency}
	}
	if l.blip[inv.Currency] {
		delete(l.blip, inv.Currency)
		return &unavailableError{inv.Currency}
	}
	l.booked[inv.Number] = true
	return nil
}

// fix makes the rates service answer for currency again.
func (l *ledger) fix(currency string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.broken, currency)
}

func (l *ledger) counts() (booked, calls int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.booked), l.calls
}

// maxAttempts is the durable policy's attempts per item; the delay between them is short so
// that the program runs in a second. The queue's default waits 1 s doubling to 1 h.
const maxAttempts = 3

// operator names who replays and discards in the letters' timelines.
const operator = "alice"

// summary is what became of the invoices, for the test.
type summary struct {
	sent, bookedAtOnce, deferred int
	outcomes                     map[record.Settled]int // the scheduler's claims by outcome
	letters                      int                    // dead letters made by the scheduler
	attempts                     map[string]int         // attempt rows of each dead letter's item, by invoice
	lastError                    string                 // of a dead letter, before any replay
	early                        durable.Resolution
	earlyRetryCount              int
	single                       durable.Resolution
	bulk                         []durable.BulkResult
	discarded                    durable.Resolution
	timeline                     []record.TimelineEntry // of the letter replayed twice
	letterStatus                 map[record.DeadLetterStatus]int
	itemCounts                   map[record.ItemState]int64
	ledgerBooked, ledgerCalls    int
	schedulerAttempts, replays   int // the calls of the ledger after the sends
}

func run(ctx context.Context, out io.Writer, dbPath string) (*summary, error) {
	outcomes := &settled{n: map[record.Settled]int{}}
	queue, err := durable.Open(ctx, sqlite.Open(dbPath), durable.Config{
		Policy:     retry.Policy{MaxAttempts: maxAttempts, BaseDelay: 50 * time.Millisecond, Strategy: retry.Fixed, Jitter: behaviors.Off},
		InstanceID: "billing-1", PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	defer queue.Close()
	durable.Register[*SyncInvoice](queue, "ledger.sync-invoice")

	books := &ledger{broken: map[string]bool{"GBP": true}, blip: map[string]bool{"USD": true}, booked: map[string]bool{}}
	m := mediator.New(nil, mediator.Config{})
	m.Observe(outcomes)
	mediator.HandleFunc(m, func(_ context.Context, inv *SyncInvoice) (mediator.Void, error) {
		return mediator.Void{}, books.book(inv)
	})
	// No in-process retry: the first retryable failure is deferred into the queue, and the
	// caller gets a *durable.DeferredError naming the stored item.
	m.Use(durable.NewDeferral(queue, durable.DeferralConfig{}), mediator.ForRequest[*SyncInvoice]())
	if err := m.Build(); err != nil {
		return nil, err
	}
	defer m.Close()

	if err := queue.Start(m); err != nil {
		return nil, err
	}
	defer queue.Shutdown(context.WithoutCancel(ctx)) // on an early return; a second call returns the first one's result

	sum := &summary{}
	fmt.Fprintln(out, "1. ten invoices are sent; the rates service has no rate for GBP, and fails once for USD")
	currencies := []string{"EUR", "GBP", "USD", "EUR", "GBP", "EUR", "GBP", "EUR", "GBP", "EUR"}
	number := map[record.ItemID]string{} // the deferred invoices by item
	for i, cur := range currencies {
		inv := &SyncInvoice{Number: fmt.Sprintf("INV-%d", i+1), Currency: cur, Cents: 1000 * (i + 1)}
		_, err := mediator.Send(ctx, m, inv)
		sum.sent++
		var deferred *durable.DeferredError
		switch {
		case err == nil:
			sum.bookedAtOnce++
			fmt.Fprintf(out, "   %-6s %s booked\n", inv.Number, cur)
		case errors.As(err, &deferred):
			sum.deferred++
			number[deferred.ItemID] = inv.Number
			fmt.Fprintf(out, "   %-6s %s deferred as item %d: %v\n", inv.Number, cur, deferred.ItemID, deferred.Cause)
		default:
			return nil, fmt.Errorf("%s: %w", inv.Number, err)
		}
	}

	fmt.Fprintf(out, "2. the scheduler retries the deferred items, %d attempts each at most\n", maxAttempts)
	if err := settle(ctx, queue); err != nil {
		return nil, err
	}
	if err := queue.Shutdown(ctx); err != nil { // its observers have heard every outcome once it stopped
		return nil, err
	}
	sum.outcomes = outcomes.counts()
	fmt.Fprintf(out, "   claims: %d succeeded, %d failed and retried, %d failed for the last time (dead)\n",
		sum.outcomes[record.SettledSucceeded], sum.outcomes[record.SettledRetried], sum.outcomes[record.SettledDead])

	fmt.Fprintln(out, "3. the dead letters, in the order of their invoices")
	page, err := queue.DeadLetters(ctx, durable.DeadLetterFilter{Source: "ledger.sync-invoice"})
	if err != nil {
		return nil, err
	}
	letters, total := page.Letters, page.Total
	slices.SortFunc(letters, func(a, b record.DeadLetter) int { return int(a.ItemID - b.ItemID) })
	sum.letters, sum.attempts = total, map[string]int{}
	ids := map[string]record.DeadLetterID{} // by invoice number
	for _, l := range letters {
		var inv SyncInvoice
		if err := json.Unmarshal(l.Payload, &inv); err != nil {
			return nil, fmt.Errorf("letter %d: %w", l.ID, err)
		}
		attempts, err := queue.Attempts(ctx, l.ItemID)
		if err != nil {
			return nil, err
		}
		ids[inv.Number] = l.ID
		sum.attempts[inv.Number] = len(attempts)
		sum.lastError = l.Error
		fmt.Fprintf(out, "   letter %d: %s (item %d, %s %d.%02d), %d attempts: %s\n", l.ID, inv.Number, l.ItemID,
			inv.Currency, inv.Cents/100, inv.Cents%100, len(attempts), describe(attempts))
		fmt.Fprintf(out, "      error: %s\n", l.Error)
	}
	if len(letters) != 4 {
		return nil, fmt.Errorf("%d dead letters, want 4 (the GBP invoices): %v", len(letters), slices.Collect(maps.Values(number)))
	}

	first := ids["INV-2"]
	fmt.Fprintf(out, "4. letter %d is replayed before the rates service is fixed\n", first)
	sum.early, err = queue.Replay(ctx, m, first, operator)
	l, _, lerr := queue.DeadLetter(ctx, first)
	if lerr != nil {
		return nil, lerr
	}
	sum.earlyRetryCount = l.RetryCount
	fmt.Fprintf(out, "   %s (%v); the letter stays %s, retry count %d\n", sum.early, err, l.Status, l.RetryCount)

	fmt.Fprintln(out, "5. the rates service is fixed: GBP has a rate again")
	books.fix("GBP")
	sum.single, err = queue.Replay(ctx, m, first, operator)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "   replay of letter %d (INV-2): %s\n", first, sum.single)

	cancelled := ids["INV-7"]
	sum.discarded, err = queue.Discard(ctx, cancelled, operator, "INV-7 was cancelled by the customer")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "   discard of letter %d (INV-7, cancelled by the customer): %s\n", cancelled, sum.discarded)

	// The bulk call reports one result per id; the discarded letter's conflict stops no other.
	bulk := []record.DeadLetterID{ids["INV-5"], cancelled, ids["INV-9"]}
	sum.bulk, err = queue.ReplayMany(ctx, m, bulk, operator)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "   bulk replay of letters %v:\n", bulk)
	for _, r := range sum.bulk {
		fmt.Fprintf(out, "     letter %d: %s", r.ID, r.Resolution)
		if r.Error != "" {
			fmt.Fprintf(out, " (%s)", r.Error)
		}
		fmt.Fprintln(out)
	}

	_, sum.timeline, err = queue.DeadLetter(ctx, first)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "6. the timeline of letter %d (INV-2)\n", first)
	for _, e := range sum.timeline {
		switch e.Kind {
		case record.TimelineAttempt:
			fmt.Fprintf(out, "   attempt #%d on %s: %s", e.Number, e.Instance, e.Outcome)
		default:
			fmt.Fprintf(out, "   %s by %s: %s", e.Kind, e.Actor, e.Outcome)
		}
		if e.Error != "" {
			fmt.Fprintf(out, " (%s)", e.Error)
		}
		fmt.Fprintln(out)
	}

	st, err := queue.Stats(ctx)
	if err != nil {
		return nil, err
	}
	sum.letterStatus, sum.itemCounts = st.DeadLetters, st.Counts
	sum.ledgerBooked, sum.ledgerCalls = books.counts()
	lt := st.DeadLetters
	fmt.Fprintln(out, "7. the counts")
	fmt.Fprintf(out, "   sent %d = %d booked at once + %d deferred\n", sum.sent, sum.bookedAtOnce, sum.deferred)
	fmt.Fprintf(out, "   deferred %d = %d booked by a retry of the scheduler + %d dead letters\n",
		sum.deferred, st.Counts[record.StateSucceeded], st.Counts[record.StateDead])
	fmt.Fprintf(out, "   dead letters %d = %d replayed + %d discarded + %d still failed\n",
		sum.letters, lt[record.DeadLetterReplayed], lt[record.DeadLetterDiscarded], lt[record.DeadLetterFailed])
	fmt.Fprintf(out, "   the ledger booked %d invoices = %d sent - %d discarded\n", sum.ledgerBooked, sum.sent, lt[record.DeadLetterDiscarded])
	sum.schedulerAttempts = sum.outcomes[record.SettledSucceeded] + sum.outcomes[record.SettledRetried] + sum.outcomes[record.SettledDead]
	sum.replays = replays(sum.early) + replays(sum.single) + countReplays(sum.bulk)
	fmt.Fprintf(out, "   it was called %d times = %d sends + %d attempts of the scheduler + %d replays\n",
		sum.ledgerCalls, sum.sent, sum.schedulerAttempts, sum.replays)
	return sum, nil
}

// settle waits until the queue has no item left to try: each is succeeded or dead.
func settle(ctx context.Context, queue *durable.Queue) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := queue.Stats(ctx)
		if err != nil {
			return err
		}
		if st.Counts[record.StatePending]+st.Counts[record.StateRunning] == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the scheduler: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// replays counts a replay that ran the handler: one that replayed the letter or left it failed.
func replays(r durable.Resolution) int {
	if r == durable.Replayed || r == durable.StillFailed {
		return 1
	}
	return 0
}

func countReplays(results []durable.BulkResult) int {
	n := 0
	for _, r := range results {
		n += replays(r.Resolution)
	}
	return n
}

// describe lists attempts as "#1 failed, #2 failed".
func describe(attempts []record.Attempt) string {
	parts := make([]string, len(attempts))
	for i, a := range attempts {
		parts[i] = fmt.Sprintf("#%d %s", a.Number, a.Outcome)
	}
	return strings.Join(parts, ", ")
}

func main() {
	keep := flag.String("db", "", "SQLite file to keep the queue in (default: a temporary file)")
	flag.Parse()
	// The work runs in a function, so that its deferred clean-up (the temporary directory)
	// runs before an exit with an error.
	err := func() error {
		path := *keep
		if path == "" {
			dir, err := os.MkdirTemp("", "switchboard-deadletters")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			path = filepath.Join(dir, "queue.db")
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		_, err := run(ctx, os.Stdout, path)
		return err
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// settled counts how the scheduler's claims ended: a durable.SettledObserver, attached to the
// mediator the queue is started with.
type settled struct {
	mu sync.Mutex
	n  map[record.Settled]int
}

// OnSettled counts one claim's outcome.
func (s *settled) OnSettled(_ string, outcome record.Settled) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[outcome]++
}

// counts returns the outcomes counted so far.
func (s *settled) counts() map[record.Settled]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.n)
}
