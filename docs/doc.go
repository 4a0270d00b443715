// Package docs checks that the Go snippets of the guides are code that compiles and runs: every
// snippet is copied from an Example (or another test file) of the module, named in an HTML
// comment above it, and this test fails when a snippet line is no longer found there, in order.
package docs
