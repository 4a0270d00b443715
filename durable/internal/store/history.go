package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/durable/driver"
)

// The types of the history (driver.HistoryStore).
type (
	HistoryRow    = driver.HistoryRow
	HistoryGauges = driver.HistoryGauges
)

// historyBreakers is the JSON of a row's breakers column.
type historyBreakers struct {
	Keys    map[string]BreakerState `json:"keys"`
	Omitted int                     `json:"omitted,omitempty"`
}

// WriteHistory stores rows, each replacing the row of its minute and instance, in one
// transaction.
func (s *Store) WriteHistory(ctx context.Context, rows []HistoryRow) error {
	if len(rows) == 0 {
		return nil
	}
	q := s.e.rebind(`INSERT INTO switchboard_history (minute, instance, outcomes, breakers) VALUES (?, ?, ?, ?)
	ON CONFLICT (minute, instance) DO UPDATE SET outcomes = excluded.outcomes, breakers = excluded.breakers`)
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		for _, r := range rows {
			outcomes := r.Outcomes
			if outcomes == nil {
				outcomes = map[string]int64{}
			}
			o, err := json.Marshal(outcomes)
			if err != nil {
				return err
			}
			var b any
			if len(r.Breakers) > 0 || r.BreakersOmitted > 0 {
				keys := make(map[string]BreakerState, len(r.Breakers))
				for k, v := range r.Breakers {
					keys[storedText(k)] = v
				}
				js, err := json.Marshal(historyBreakers{Keys: keys, Omitted: r.BreakersOmitted})
				if err != nil {
					return err
				}
				b = string(js)
			}
			if _, err := tx.ExecContext(ctx, q, micros(r.Minute), storedText(r.Instance), string(o), b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("durable: write history: %w", err)
	}
	return nil
}

// WriteHistoryGauges stores the fleet's gauges of minute (the row of instance "") unless the
// minute has them: one lookup of the primary key, then gauges and an insert that leaves a
// row a concurrent writer made first.
func (s *Store) WriteHistoryGauges(ctx context.Context, minute time.Time, gauges func(ctx context.Context) (HistoryGauges, error)) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, s.e.rebind(`SELECT 1 FROM switchboard_history WHERE minute = ? AND instance = ''`), micros(minute)).Scan(&one)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return false, fmt.Errorf("durable: write history gauges: %w", err)
	}
	g, err := gauges(ctx)
	if err != nil {
		return false, fmt.Errorf("durable: write history gauges: %w", err)
	}
	js, err := json.Marshal(g)
	if err != nil {
		return false, fmt.Errorf("durable: write history gauges: %w", err)
	}
	res, err := s.db.ExecContext(ctx, s.e.rebind(`INSERT INTO switchboard_history (minute, instance, outcomes, gauges) VALUES (?, '', '{}', ?)
	ON CONFLICT (minute, instance) DO NOTHING`), micros(minute), string(js))
	if err != nil {
		return false, fmt.Errorf("durable: write history gauges: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("durable: write history gauges: %w", err)
	}
	return n == 1, nil
}

// History returns the rows of the minutes from since on, in minute and instance order (read
// as the reads that run now and then are: readRows).
func (s *Store) History(ctx context.Context, since time.Time) ([]HistoryRow, error) {
	var out []HistoryRow
	err := s.readRows(ctx, s.e.rebind(`SELECT minute, instance, outcomes, gauges, breakers FROM switchboard_history
	WHERE minute >= ? ORDER BY minute, instance`), []any{micros(since)}, func(rows RowReader) error {
		for rows.Next() {
			var (
				minute           int64
				r                HistoryRow
				outcomes         string
				gauges, breakers sql.NullString
			)
			if err := rows.Scan(&minute, &r.Instance, &outcomes, &gauges, &breakers); err != nil {
				return err
			}
			r.Minute = fromMicros(minute)
			if err := json.Unmarshal([]byte(outcomes), &r.Outcomes); err != nil {
				return fmt.Errorf("the outcomes of minute %s: %w", r.Minute.Format(time.RFC3339), err)
			}
			if gauges.Valid {
				r.Gauges = new(HistoryGauges)
				if err := json.Unmarshal([]byte(gauges.String), r.Gauges); err != nil {
					return fmt.Errorf("the gauges of minute %s: %w", r.Minute.Format(time.RFC3339), err)
				}
			}
			if breakers.Valid {
				var b historyBreakers
				if err := json.Unmarshal([]byte(breakers.String), &b); err != nil {
					return fmt.Errorf("the breakers of minute %s: %w", r.Minute.Format(time.RFC3339), err)
				}
				r.Breakers, r.BreakersOmitted = b.Keys, b.Omitted
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("durable: history: %w", err)
	}
	return out, nil
}

// PruneHistory deletes the rows of the minutes before before (a range of the primary key).
func (s *Store) PruneHistory(ctx context.Context, before time.Time) (int, error) {
	res, err := s.db.ExecContext(ctx, s.e.rebind(`DELETE FROM switchboard_history WHERE minute < ?`), micros(before))
	if err != nil {
		return 0, fmt.Errorf("durable: prune history: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("durable: prune history: %w", err)
	}
	return int(n), nil
}

var _ driver.HistoryStore = (*Store)(nil)
