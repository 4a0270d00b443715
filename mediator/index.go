package mediator

import (
	"math/bits"
	"reflect"
	"unsafe"
)

// eface is the layout of an empty interface value.
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

// typeKey returns the identity of v's dynamic type: the address of its type descriptor, unique
// per type in a program, or 0 for a nil interface.
func typeKey(v any) uintptr {
	return uintptr((*eface)(unsafe.Pointer(&v)).typ)
}

// typeIndex maps type keys to values. It is built once and then only read, so a lookup is a
// multiply, a shift and usually one comparison: cheaper than a map with an interface or even
// an integer key, which matters on a path whose budget is a few nanoseconds.
type typeIndex[V any] struct {
	shift uint
	slots []typeSlot[V]
}

type typeSlot[V any] struct {
	key uintptr
	val V
}

func newTypeIndex[V any](entries map[uintptr]V) typeIndex[V] {
	size := 8
	for size < 2*len(entries) {
		size <<= 1
	}
	x := typeIndex[V]{shift: uint(64 - bits.TrailingZeros(uint(size))), slots: make([]typeSlot[V], size)}
	for k, v := range entries {
		i := x.home(k)
		for x.slots[i].key != 0 {
			i = (i + 1) & uintptr(size-1)
		}
		x.slots[i] = typeSlot[V]{key: k, val: v}
	}
	return x
}

func (x *typeIndex[V]) home(k uintptr) uintptr {
	return uintptr(uint64(k)*0x9E3779B97F4A7C15) >> (x.shift & 63) // & 63: no branch for a shift past 63
}

// homeSlot returns the slot where an entry of key k sits unless it was displaced by a
// collision: an inlinable first probe.
func (x *typeIndex[V]) homeSlot(k uintptr) *typeSlot[V] {
	return &x.slots[x.home(k)]
}

// get returns the value under k and whether there is one.
func (x *typeIndex[V]) get(k uintptr) (V, bool) {
	if v := x.find(k); v != nil {
		return *v, true
	}
	var zero V
	return zero, false
}

// find returns the value under k in place, or nil if there is none.
func (x *typeIndex[V]) find(k uintptr) *V {
	mask := uintptr(len(x.slots) - 1)
	for i := x.home(k); ; i = (i + 1) & mask {
		s := &x.slots[i&mask]
		if s.key == k && k != 0 {
			return &s.val
		}
		if s.key == 0 {
			return nil
		}
	}
}

// sameRequest reports whether a and b are the same interface value: the same dynamic type and
// the same data word (for a pointer, the pointer itself). Unlike ==, it never panics on
// incomparable dynamic types.
func sameRequest(a, b any) bool {
	return *(*eface)(unsafe.Pointer(&a)) == *(*eface)(unsafe.Pointer(&b))
}

// nilData reports whether v holds a nil pointer of some type. The data word of an interface
// holding a nil pointer is nil; so is that of a pointer-shaped value (a struct of one nil
// pointer field), which the kind check tells apart on that rare path.
func nilData(v any) bool {
	return (*eface)(unsafe.Pointer(&v)).data == nil && isNilPointer(v)
}

// isNilPointer is nilData's rare path, kept out of line so that nilData inlines into Send.
func isNilPointer(v any) bool { return v != nil && reflect.TypeOf(v).Kind() == reflect.Pointer }
