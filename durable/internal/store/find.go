package store

import (
	"context"
	"fmt"
)

// findItemsSQL reads the items a text names, newest first: by reference, by token, holding it
// as their dedupe key (the dedupe index's predicate, holdsKey, repeated so that the index
// serves it), or dead with a letter whose key it is. Each branch reads an index. Placeholders:
// the text four times, the limit.
const findItemsSQL = `SELECT ` + itemColumns + ` FROM ` + allItems + ` WHERE id IN (
	SELECT id FROM ` + allItems + ` WHERE reference = ?
	UNION SELECT id FROM ` + allItems + ` WHERE token = ?
	UNION SELECT id FROM switchboard_items WHERE dedupe_key = ? AND ` + holdsKey + `
	UNION SELECT item_id FROM switchboard_dead_letters WHERE item_key = ? AND item_key <> '' AND item_id IS NOT NULL)
	ORDER BY id DESC LIMIT ?`

// findLettersSQL reads the dead letters a text names, newest first: those with it as their
// key, and those of the items whose reference or token it is. Placeholders: the text three
// times, the limit.
const findLettersSQL = `SELECT ` + deadLetterColumns + ` FROM switchboard_dead_letters d WHERE d.id IN (
	SELECT id FROM switchboard_dead_letters WHERE item_key = ? AND item_key <> ''
	UNION SELECT l.id FROM switchboard_dead_letters l JOIN ` + allItems + ` i ON i.id = l.item_id WHERE i.reference = ?
	UNION SELECT l.id FROM switchboard_dead_letters l JOIN ` + allItems + ` i ON i.id = l.item_id WHERE i.token = ?)
	ORDER BY d.id DESC LIMIT ?`

// FindItems returns the items and dead letters text names (see driver.ItemFinder).
func (s *Store) FindItems(ctx context.Context, text string, limit int) ([]Item, []DeadLetter, error) {
	var items []Item
	err := s.readRows(ctx, s.e.rebind(findItemsSQL), []any{text, text, text, text, limit}, func(rows RowReader) error { return readItems(rows, &items) })
	if err != nil {
		return nil, nil, fmt.Errorf("durable: find %q: %w", text, err)
	}
	var letters []DeadLetter
	err = s.readRows(ctx, s.e.rebind(findLettersSQL), []any{text, text, text, limit}, func(rows RowReader) error { return readDeadLetters(rows, &letters) })
	if err != nil {
		return nil, nil, fmt.Errorf("durable: find %q: dead letters: %w", text, err)
	}
	return items, letters, nil
}
