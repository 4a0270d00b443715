package durable

import "time"

// defaultRetention is how long succeeded items are kept by default (SchedulerConfig.Retention).
const defaultRetention = 24 * time.Hour
