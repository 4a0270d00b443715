// Package handlers adapts functions to mediator handlers and composes handlers: Otherwise
// builds one handler from a primary and ordered fallbacks for the same request type, where the
// first success wins and, when every one fails, every error is kept.
package handlers
