package admin

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// DefaultName is the name the API and the dashboard give the breaker registry, rate limiter,
// retry budget and hedging behavior of Config.Breakers, Config.RateLimits, Config.Budgets and
// Config.Hedges. The named ones of Config.BreakerRegistries, Config.RateLimiters,
// Config.RetryBudgets and Config.HedgeBehaviors are shown beside them under their own names,
// which therefore cannot be "default".
const DefaultName = "default"

// named is one source of a kind (a registry, a limiter, a budget, a hedging behavior) with
// the name the API and the dashboard show it under.
type named[T any] struct {
	name string
	v    T
}

// sourcesOf returns one (the field of a single source, under DefaultName) and then the named
// ones of more in name order: the order the API lists them in.
func sourcesOf[T any](one T, more map[string]T) []named[T] {
	out := make([]named[T], 0, len(more)+1)
	if any(one) != nil {
		out = append(out, named[T]{DefaultName, one})
	}
	for _, name := range slices.Sorted(maps.Keys(more)) {
		out = append(out, named[T]{name, more[name]})
	}
	return out
}

// validateNamed reports the problems of one of Config's maps of named sources: a name that
// is empty, "default", not plain text, or a value that is nil.
func validateNamed[T any](field string, m map[string]T) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(m)) {
		switch {
		case strings.TrimSpace(name) == "":
			errs = append(errs, fmt.Errorf("admin: Config.%s has an empty name: name each so the dashboard can tell them apart", field))
			continue
		case name == DefaultName:
			errs = append(errs, fmt.Errorf("admin: Config.%s names one %q, the name of the single field's: choose another", field, DefaultName))
		}
		if err := badText("admin: Config."+field+" name", name); err != nil {
			errs = append(errs, err)
		}
		if v := m[name]; any(v) == nil || nilValue(v) {
			errs = append(errs, fmt.Errorf("admin: Config.%s[%s] is nil: remove it, or pass a value", field, quote(name)))
		}
	}
	return errs
}

func (s *server) breakerRegistries() []named[Breakers] {
	return sourcesOf(s.cfg.Breakers, s.cfg.BreakerRegistries)
}

func (s *server) rateLimiters() []named[RateLimits] {
	return sourcesOf(s.cfg.RateLimits, s.cfg.RateLimiters)
}

func (s *server) retryBudgets() []named[Budgets] { return sourcesOf(s.cfg.Budgets, s.cfg.RetryBudgets) }

func (s *server) hedgeBehaviors() []named[Hedges] {
	return sourcesOf(s.cfg.Hedges, s.cfg.HedgeBehaviors)
}

// registryOf finds the registry holding the breaker of key for a request: the one its query
// parameter registry names, else the only one that knows key. It answers the request itself
// when it cannot, and returns ok false then.
func (s *server) registryOf(w http.ResponseWriter, r *http.Request, key string) (named[Breakers], bool) {
	q, ok := query(w, r, "registry")
	if !ok {
		return named[Breakers]{}, false
	}
	want, given := q["registry"]
	if !given {
		want = []string{""}
	}
	reg, code, msg := s.findRegistry(want[0], key)
	if code != 0 {
		writeError(w, code, msg)
		return named[Breakers]{}, false
	}
	return reg, true
}

// findRegistry returns the registry named name (any name but ""), or for "" the only one that
// knows key; when there is none it returns the status to answer (404 for an unknown registry
// or key, 400 for a key several registries know) and its message. With a single registry it
// returns it whatever it knows, so that the registry's own error is the answer.
func (s *server) findRegistry(name, key string) (named[Breakers], int, string) {
	regs := s.breakerRegistries()
	if name != "" {
		i := slices.IndexFunc(regs, func(n named[Breakers]) bool { return n.name == name })
		if i < 0 {
			return named[Breakers]{}, http.StatusNotFound, "no breaker registry named " + quote(name) + ": want " + orList(quoteAll(namesOf(regs)))
		}
		return regs[i], 0, ""
	}
	if len(regs) == 1 {
		return regs[0], 0, ""
	}
	var found []named[Breakers]
	for _, reg := range regs {
		if _, err := reg.v.Get(key); err == nil {
			found = append(found, reg)
		}
	}
	switch len(found) {
	case 0:
		return named[Breakers]{}, http.StatusNotFound, "unknown breaker " + quote(key) + " in every registry"
	case 1:
		return found[0], 0, ""
	}
	return named[Breakers]{}, http.StatusBadRequest, "breaker " + quote(key) + " is in registries " +
		strings.Join(quoteAll(namesOf(found)), " and ") + ": say which registry"
}

func namesOf[T any](ns []named[T]) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.name
	}
	return out
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = quote(s)
	}
	return out
}

// unknownBreaker is the 404 of a key its registry does not know.
func unknownBreaker(w http.ResponseWriter, reg named[Breakers], key string, many bool) {
	msg := "unknown breaker " + quote(key)
	if many {
		msg += " in registry " + quote(reg.name)
	}
	writeError(w, http.StatusNotFound, msg)
}
