package tracing

// Propagator returns the propagator of the trace context: it means the type it shares its
// name with.
func Propagator() any { return nil }
