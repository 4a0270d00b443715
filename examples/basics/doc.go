// Command basics shows the four things a mediator does, on a small shop: Send a request and get
// its typed response, Send a command (a request whose response is mediator.Void), Publish a
// notification to two handlers, and range over a Stream. The handlers are registered in a
// samber/do/v2 injector, which gives their constructors the catalog they depend on. It ends
// with the typed errors Send returns for a request that fails validation and for a request
// type nobody handles.
package main
