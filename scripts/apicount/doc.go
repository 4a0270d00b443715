// Command apicount prints the number of exported top-level identifiers (constants, variables,
// functions and types; methods and fields not counted) of each package of the module, and
// checks the module's naming rules, each so that one exported name means one thing:
//
//   - No exported name repeats its package's name (retry.Policy, not retry.RetryPolicy; the
//     package's own name alone, as in time.Time, is fine).
//   - No exported type name is declared by two packages, except Config and Behavior, which mean
//     the same in every package: its component's configuration and the behavior it provides.
//     An alias of the same name (type Driver = driver.Driver) re-exports the one type.
//   - No exported name is a type in one package and a function, constant or variable in
//     another: a reader who knows record.Attempt (an attempt row) reads retry.Attempt(ctx) as
//     something that returns one. The exceptions (homonyms) are functions that mean the type:
//     tracing.Propagator returns a durable.Propagator.
//   - A few field and method names are reserved to one meaning, which the field's type (a
//     method's single result) shows: Key is a behaviors.KeyFunc or the string it computes,
//     never a context key (that is a mediator.ContextKey); Outcome is a type named …Outcome
//     whose doc lists the values, never a bare string.
//
// With -check it exits non-zero when a rule is broken.
//
//	go run ./scripts/apicount [-check] [dir]
package main
