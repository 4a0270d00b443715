package durable

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/switchboard-go/switchboard/durable/internal/executor"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// BatchItem is one request of Queue.RunBatch.
type BatchItem struct {
	Key     string // the caller's name for it (its record's id), kept by its dead letter
	Request any    // a pointer of a registered type
}

// BatchResult reports a batch run.
type BatchResult struct {
	Processed   int                   // items sent: Succeeded + Invalid
	Succeeded   int                   // sends that returned no error
	Invalid     int                   // sends that failed, each captured as a dead letter
	DeadLetters []record.DeadLetterID // the letters of the failed items, in order
}

// RunBatch sends items' requests through sender in order; an item whose send fails (an error,
// a panic) becomes a dead letter of source (required) and the rest still run. Every type must
// be registered (else ErrUnknownRequest, nothing sent). Letters are never retried on their own:
// bad data fails until someone fixes it. Sends are marked mediator.Stored (no deferral). When
// ctx ends or a letter cannot be stored, it stops with the counts so far. Not durable: after
// a crash the rest is the caller's to know.
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
			unknown = append(unknown, fmt.Errorf("item %d (key %q): %w", i, it.Key, q.reg.unknownType(reflect.TypeOf(it.Request))))
		}
	}
	if len(unknown) > 0 {
		return res, fmt.Errorf("durable: RunBatch: nothing sent: every request type must be registered (Register): %w", errors.Join(unknown...))
	}
	for _, it := range items {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		err := executor.Send(mediator.WithMarks(ctx, it.Request, mediator.Stored), sender, it.Request)
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
func (q *Queue) capture(ctx context.Context, source string, it BatchItem, failure error) (record.DeadLetterID, error) {
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
	q.announce(ctx, record.DeadLetter{ID: record.DeadLetterID(id), Source: source, Name: name, Key: it.Key, Payload: payload, Error: msg,
		Status: record.DeadLetterFailed, CreatedAt: now, UpdatedAt: now, Metadata: decodeMetadata(md)})
	return record.DeadLetterID(id), nil
}
