// Package testkit holds the request, errors and helpers the tests of the behavior packages
// share, so that each package's tests do not carry a copy of them.
package testkit
