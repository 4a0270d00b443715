// Package classify holds the error classification that package behaviors and the behavior
// packages share, so that the default retryable status codes and the retryable test are
// written once.
package classify
