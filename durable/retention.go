package durable

import "time"

// defaultRetention is how long succeeded items are kept by default (Config.Retention).
const defaultRetention = 24 * time.Hour
