package durable

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/mediator"
)

// BatchItem is one request of a batch run (Queue.RunBatch).
type BatchItem struct {
	// Key is the caller's name for the item (the id of the record it carries, say): a dead
	// letter of the item keeps it, so an operator can tell which record failed. It may be empty.
	Key string
	// Request is the request to send, a pointer of a type registered on the queue (Register),
	// so that a failed item can be stored and replayed.
	Request any
}

// BatchResult reports a batch run.
type BatchResult struct {
	// Processed is the number of items sent: Succeeded + Invalid.
	Processed int
	// Succeeded is the number of items whose send returned no error.
	Succeeded int
	// Invalid is the number of items that failed and were captured as dead letters.
	Invalid int
	// DeadLetters are the letters of the failed items, in the order of the items.
	DeadLetters []DeadLetterID
}

// RunBatch sends the requests of items through sender (the built mediator), one after another
// in their order, and isolates their failures: an item whose send fails (an error, or a panic,
// recovered) is captured as a dead letter with source, the item's key, its encoded payload
// (unless it is longer than Config.MaxPayloadBytes: the letter then says so) and its error,
// counted as Invalid, and the remaining items still run. A pass over many records (a
// synchronisation, an import) thus completes however many of them are bad, and each bad one
// waits for an operator with everything needed to inspect and replay it.
//
// RunBatch is a method of the queue, rather than a behavior or a helper of its own, because
// the capture needs what only the queue has: the store that keeps the letters in the table
// Replay and Discard work on, and the registry that encodes the request and, at replay,
// decodes it. So every item's request type must be registered: RunBatch checks them all
// before sending anything, and refuses the batch with an error (matching ErrUnknownRequest)
// that names each unregistered item. source is required: listings filter on it.
//
// The letters of a batch are never retried automatically, unlike the items the scheduler
// retries: an item of a batch that fails usually fails for a reason of its own — bad data, a
// mapping or configuration mistake — that fails it identically however often it is run, until
// someone fixes it. Replay (Queue.Replay) is the operator's decision, once the cause is fixed.
// Transient failures are the business of the pipeline's in-process retry, which still runs for
// each send. The sends are marked mediator.Stored, so that a deferral in the pipeline does not
// store a failed item a second time as an item to retry.
//
// When ctx ends, RunBatch stops before the next item and returns ctx's error with the counts so
// far; an item whose send failed because ctx ended is not captured (the caller gave up, the item
// did not fail). An error storing a letter stops the batch too, with the counts so far: going
// on would lose the failures it exists to keep. Config.OnDead is called for each letter. A
// letter keeps the metadata the queue's propagators take from ctx, so its replay runs with it.
//
// A batch is not durable work: nothing is stored about it but its letters. If the process dies
// during RunBatch, the letters already captured survive and the rest of the batch — the items
// not reached, and whether the others succeeded — is the caller's to know: keep the batch's
// progress (or make its items idempotent and run it again) when that matters. For work that
// must survive a crash item by item, Enqueue the items instead.
func (q *Queue) RunBatch(ctx context.Context, sender mediator.Sender, source string, items []BatchItem) (BatchResult, error) {
	var res BatchResult
	if sender == nil {
		return res, errors.New("durable: RunBatch: a sender (the mediator) is required")
	}
	if source == "" {
		return res, errors.New("durable: RunBatch: source is required: dead letters are listed by it")
	}
	var unknown []error
	for i, it := range items {
		if it.Request == nil {
			unknown = append(unknown, fmt.Errorf("item %d (key %q): nil request: %w", i, it.Key, mediator.ErrNilRequest))
			continue
		}
		if _, ok := q.reg.nameOf(it.Request); !ok {
			unknown = append(unknown, fmt.Errorf("item %d (key %q): %w", i, it.Key, &unknownRequestError{Type: fmt.Sprintf("%T", it.Request)}))
		}
	}
	if len(unknown) > 0 {
		return res, fmt.Errorf("durable: RunBatch: nothing sent: every request type must be registered (Register): %w", errors.Join(unknown...))
	}
	for _, it := range items {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		err := send(mediator.WithMarks(ctx, it.Request, mediator.Stored), sender, it.Request)
		if err == nil {
			res.Processed++
			res.Succeeded++
			continue
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		id, err := q.capture(ctx, source, it, err)
		if err != nil {
			return res, err
		}
		res.Processed++
		res.Invalid++
		res.DeadLetters = append(res.DeadLetters, id)
	}
	return res, nil
}

// capture stores the dead letter of a failed batch item and announces it.
func (q *Queue) capture(ctx context.Context, source string, it BatchItem, failure error) (DeadLetterID, error) {
	msg := failure.Error()
	name, payload, err := q.reg.encode(it.Request)
	if err == nil && len(payload) > q.maxPayload {
		err, payload = &PayloadTooLargeError{Name: name, Size: len(payload), Limit: q.maxPayload}, nil
	}
	if err != nil {
		// Kept all the same, without its payload: the failure is what the operator needs to see.
		name, _ = q.reg.nameOf(it.Request)
		msg += "; the payload was not kept: " + err.Error()
	}
	md, err := q.metadata(ctx, name)
	if err != nil {
		msg += "; its metadata was not kept: " + err.Error()
	}
	now := q.clock.Now()
	id, err := q.store.InsertDeadLetter(ctx, store.NewDeadLetter{Source: source, Name: name, Key: it.Key, Payload: payload,
		Error: msg, Now: now, Metadata: md})
	if err != nil {
		return 0, fmt.Errorf("durable: RunBatch: item %q failed (%v) and its dead letter was not stored: %w", it.Key, failure, err)
	}
	q.announce(ctx, DeadLetter{ID: DeadLetterID(id), Source: source, Name: name, Key: it.Key, Payload: payload, Error: msg,
		Status: DeadLetterFailed, CreatedAt: now, UpdatedAt: now, Metadata: decodeMetadata(md)})
	return DeadLetterID(id), nil
}
