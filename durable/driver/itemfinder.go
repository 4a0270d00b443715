package driver

import "context"

// ItemFinder is the optional capability behind durable.Queue.Find: the items and dead letters an
// application's id names. Without it Find fails, saying the driver lacks it; the queue itself
// does not need it.
type ItemFinder interface {
	// FindItems returns at most limit items, newest first, whose reference (NewItem.Reference)
	// or token is text, that hold text as their dedupe key (pending, running, or succeeded
	// within their uniqueness window), or whose dead letter has text as its key; and at most
	// limit dead letters, newest first, of those items and with text as their key. text is
	// matched whole.
	FindItems(ctx context.Context, text string, limit int) ([]ItemRow, []DeadLetterRow, error)
}
