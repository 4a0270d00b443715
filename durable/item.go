package durable

import (
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// Stats summarises a queue for dashboards and metrics.
type Stats struct {
	Counts    map[record.ItemState]int64 // items per state; every state is present
	OldestDue time.Duration              // how long the oldest due item has waited; zero for none
	// CountAge names the states with more than ExactCountLimit items, whose counts are full
	// counts kept between calls (Queue.Stats), each with how long ago it was made: zero when
	// this call made it. A state absent from it was counted by this call.
	CountAge map[record.ItemState]time.Duration
	// DeadLetters counts letters per status, every status present. Alert on its
	// record.DeadLetterFailed: it falls as letters are dealt with, where record.StateDead only
	// grows.
	DeadLetters map[record.DeadLetterStatus]int
	// LetterCountAge is CountAge for DeadLetters: the statuses with more than ExactCountLimit
	// letters, whose counts are full counts kept between calls, each with its age.
	LetterCountAge map[record.DeadLetterStatus]time.Duration
}

func itemOf(it store.Item) record.Item {
	return record.Item{
		ID: record.ItemID(it.ID), Name: it.Name, Payload: it.Payload, State: record.ItemState(it.State), Attempts: it.Attempts,
		Interruptions: it.Interruptions, Unattributed: it.Unattributed, Isolate: it.Isolate, ParkedKey: it.ParkedKey,
		DedupeKey: it.DedupeKey, OrderingKey: it.OrderingKey, NextAt: it.NextAt, LeaseOwner: it.LeaseOwner,
		LeaseUntil: it.LeaseUntil, LastError: it.LastError, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
		Metadata: decodeMetadata(it.Metadata), Token: it.Token, GuardKey: it.GuardKey, Deadline: it.Deadline,
		UniqueFor: it.UniqueFor, UniqueReleasedAt: it.UniqueReleasedAt, FairnessKey: it.FairnessKey, Priority: it.Priority,
		DebounceKey: it.DebounceKey, DebounceUntil: it.DebounceUntil, Debounces: it.Debounces, Reference: it.Reference,
	}
}

func attemptOf(a store.Attempt) record.Attempt {
	return record.Attempt{ID: a.ID, ItemID: record.ItemID(a.ItemID), Number: a.Number, Instance: a.Instance, StartedAt: a.StartedAt,
		EndedAt: a.EndedAt, Outcome: record.Outcome(a.Outcome), Error: a.Error}
}
