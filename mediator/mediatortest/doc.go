// Package mediatortest helps test code that sends, publishes and streams through the mediator:
// a Spy that records every request, notification and stream request and answers from stubs (or
// passes on to a real mediator), and stub handlers to register in a real one.
package mediatortest
