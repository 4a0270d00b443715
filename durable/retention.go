package durable

import "time"

// defaultRetention is how long succeeded items are kept by default (Config.Retention).
const defaultRetention = 24 * time.Hour

// DefaultHistoryRetention is how long the history of Queue.History is kept by default
// (Config.HistoryRetention): the dashboard's longest range, 24 h, and an hour more, so that the
// chart's left edge never shows minutes already pruned as quiet ones.
const DefaultHistoryRetention = 25 * time.Hour
