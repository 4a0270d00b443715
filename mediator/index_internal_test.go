package mediator

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// many is a family of request types, one per array length, each answering its own length.
type many[A any] struct {
	Returns[int]
}

func handleMany[A any](m *Mediator) {
	HandleFunc(m, func(context.Context, *many[A]) (int, error) { return reflect.TypeFor[A]().Len(), nil })
}

// Send finds a request type whose entry a collision moved out of its home slot as surely as
// one in its home slot. Type descriptors lie at regular strides, which the index's hash spreads
// without collisions, so the test makes one: it moves an entry to the next free slot and
// leaves a stranger in its home slot.
func TestSendFindsDisplacedEntries(t *testing.T) {
	m := New(nil, Config{})
	handleMany[[1]byte](m)
	handleMany[[2]byte](m)
	handleMany[[3]byte](m)
	require.NoError(t, m.Build())
	ctx := context.Background()

	built := m.table.Load()
	moved := *built
	idx := &moved.requests
	idx.slots = slices.Clone(idx.slots)
	mask := uintptr(len(idx.slots) - 1)
	k := keyOfType(reflect.TypeFor[*many[[2]byte]]())
	home := idx.home(k)
	free := (home + 1) & mask
	for idx.slots[free].key != 0 {
		free = (free + 1) & mask
	}
	require.Equal(t, k, idx.slots[home].key)
	idx.slots[free] = idx.slots[home]
	idx.slots[home].key = k ^ 1 // no type's key: descriptors are aligned
	m.table.Store(&moved)

	for n, send := range []func() (int, error){
		func() (int, error) { return Send(ctx, m, &many[[1]byte]{}) },
		func() (int, error) { return Send(ctx, m, &many[[2]byte]{}) },
		func() (int, error) { return Send(ctx, m, &many[[3]byte]{}) },
	} {
		got, err := send()
		require.NoError(t, err)
		assert.Equal(t, n+1, got)
	}
	_, err := Send(ctx, m, (*many[[2]byte])(nil))
	assert.ErrorIs(t, err, ErrNilRequest)
}
