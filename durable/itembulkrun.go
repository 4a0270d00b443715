package durable

import (
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// workItems changes the pending items of an action on items one at a time, in id order,
// throttled by the action's rate; it returns the final state (and its message), or "" when the
// run stopped before the end (shutdown, lost lease, cancel). Each item's change and the move of
// the cursor past it are one transaction, so a run taken over after a crash neither repeats
// nor misses an item.
func (r *bulkRun) workItems() (state, msg string) {
	s := r.s
	kind := record.BulkActionKind(r.row.Kind)
	change := store.ItemBulkChange{Kind: kind, Priority: r.row.Priority, HeadStart: time.Duration(r.row.Priority) * s.q.priorityAging}
	cursor := record.ItemID(r.cursor)
	for r.ctx.Err() == nil {
		ctx, cancel := s.storeCtx()
		items, err := s.q.store.BulkItems(ctx, r.items, cursor, r.row.MaxItem, bulkBatchSize)
		cancel()
		s.noteStore("read bulk action items", err)
		if err != nil {
			r.pause(bulkBusyWait)
			continue
		}
		if len(items) == 0 {
			return store.BulkDone, ""
		}
		for _, it := range items {
			if !r.throttle() {
				return "", ""
			}
			held, ok := r.stepItem(cursor, it.ID, change)
			if !ok {
				return "", ""
			}
			if !held {
				r.stop() // cancelled, or taken over
				return "", ""
			}
			cursor = it.ID
			r.cursor = store.DeadLetterID(cursor)
		}
	}
	return "", ""
}

// stepItem changes item id (if still pending) and moves the cursor from from past it, trying
// again while the database fails; ok is false when the run stops first, held false when the
// action is no longer this run's.
func (r *bulkRun) stepItem(from, id record.ItemID, change store.ItemBulkChange) (held, ok bool) {
	s := r.s
	for {
		ctx, cancel := s.storeCtx()
		held, changed, err := s.q.store.StepItemBulkAction(ctx, r.row.ID, s.cfg.InstanceID, from, id, change, s.q.clock.Now())
		cancel()
		s.noteStore(fmt.Sprintf("change an item of bulk action %d", r.row.ID), err)
		if err == nil {
			if changed && change.Kind == record.BulkRunItemsNow {
				s.Wake() // the item is due: claim it now rather than at the next poll
			}
			return held, true
		}
		if !r.pause(bulkBusyWait) {
			return false, false
		}
	}
}

// itemBulkEndAudit returns the audit entry of the end of an action on items in state, with its
// totals, written with the end: the audit log holds what it changed, as the entries of Cancel
// and RunNow would have.
func (q *Queue) itemBulkEndAudit(state, msg string) func(store.BulkActionRow) *store.AuditRow {
	return func(b store.BulkActionRow) *store.AuditRow {
		detail := state + "; " + itemBulkTotals(b)
		if msg != "" {
			detail += "; " + msg
		}
		return &store.AuditRow{At: q.clock.Now(), Actor: b.Actor, Action: string(record.AuditEndBulkAction),
			TargetKind: string(record.AuditTargetBulkAction), Target: fmt.Sprint(b.ID), Detail: detail, Outcome: record.AuditDone}
	}
}
