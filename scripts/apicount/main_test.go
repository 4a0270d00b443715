package main

import (
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRules: every rule is reported on a small module that breaks each once, and nothing else
// is (the allowed homonym, the well-typed fields and the unexported type's members pass).
func TestRules(t *testing.T) {
	pkgs, problems, err := analyze("testdata/module")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 5 {
		t.Errorf("packages %v; want 5", pkgs)
	}
	want := []string{
		"retry.RetryPolicy repeats its package name",
		"field breaker.Config.Key is a mediator.ContextKey; a field named Key must be a behaviors.KeyFunc or a string key (a typed context key is a mediator.ContextKey)",
		"method breaker.Registry.Outcome is a string; a method named Outcome must be a type named …Outcome whose doc lists its values, not a bare string",
		"field durable.Entry.Outcome is a string; a field named Outcome must be a type named …Outcome whose doc lists its values, not a bare string",
		"type Attempt is declared by breaker, durable",
		"Attempt is a type in breaker, durable and a function or value in retry",
		"Entry is a type in durable and a function or value in handlers",
	}
	slices.Sort(want)
	got := slices.Clone(problems)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestModule: the module itself keeps every rule.
func TestModule(t *testing.T) {
	_, problems, err := analyze("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}
