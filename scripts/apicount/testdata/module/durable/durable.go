package durable

// Attempt is a row.
type Attempt struct{ Number int }

// Propagator carries metadata.
type Propagator interface{ Keys() []string }

// Entry has an Outcome that is a bare string.
type Entry struct {
	Outcome string
	Status  Outcome
}

// Outcome is how an attempt ended.
type Outcome string

// Row has a well-typed Outcome and a string Key.
type Row struct {
	Outcome Outcome
	Key     string
}

type hidden struct{ Outcome string }

// Outcome of an unexported type's method is not checked.
func (hidden) Result() string { return "" }
