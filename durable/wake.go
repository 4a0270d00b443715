package durable

import (
	"crypto/rand"
	"encoding/hex"
)

// notifyDue tells the other instances that an item is due (PostgreSQL; see package
// durable/internal/notify), unless the database cannot.
func (q *Queue) notifyDue() {
	if q.notifier != nil {
		q.notifier.Due()
	}
}

// newSenderName returns a name for a queue's notifications, unique among the instances.
func newSenderName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
