package metrics_test

import (
	"reflect"
	"slices"
	"strconv"
)

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

func itoa(n int) string { return strconv.Itoa(n) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
