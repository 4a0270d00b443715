// Package validation holds the validation behavior of switchboard: requests that implement
// Validator or ContextValidator are checked before anything else of their pipeline runs, and a
// request that fails its check ends in an *Error (matching ErrInvalid) that retry never
// retries and a breaker never counts.
package validation
