package durable

import (
	"reflect"

	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// StoreOf returns q's store, for the tests of package durable_test that work below the queue
// (claims, completions, sweeps, leases).
func StoreOf(q *Queue) *store.Store { return q.store }

// EncodeFor encodes req as q's registry does for Enqueue.
func EncodeFor(q *Queue, req any) (name string, payload []byte, err error) { return q.reg.encode(req) }

// DecodeFor decodes a payload as q's scheduler does.
func DecodeFor(q *Queue, name string, payload []byte) (any, error) {
	return q.reg.decode(name, payload)
}

// Registered reports whether request type t is registered on q.
func Registered(q *Queue, t reflect.Type) bool { return q.reg.has(t) }
