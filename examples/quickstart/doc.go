// Command quickstart sends a request through a staged pipeline and publishes a notification to
// several handlers, printing each step.
package main
