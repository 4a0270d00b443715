// Command adminmount mounts the admin API and dashboard under /ops/ of an application's own
// http.ServeMux, behind the application's own login: a session cookie of its own, set by its
// /login form and expiring after eight hours, names the user; a middleware keeps everyone who
// has not logged in (or whose login expired) out of /ops/, and the admin handler's Authorizer
// lets in only the application's staff, each with the admin role the application gives them
// (ada an operator, carol a viewer), recording them as the actors of what they do. The admin
// shows a durable queue (SQLite in a temporary file, with pending items and a dead letter) and
// a circuit breaker registry.
//
// The program serves the application on 127.0.0.1 and then acts as its client, printing each
// answer: without a login /ops/ is refused, a user who is not on the staff is forbidden, the
// viewer reads /ops/api/queue and is refused a breaker's trip with the reason, the operator
// reads /ops/api/queue and /ops/api/breakers, trips a breaker, discards a dead letter, is
// refused a concurrency limit (a change of configuration, an admin's), gets the dashboard page
// and its assets under the prefix, and a cross-site request that would change state is refused.
// With -serve it then stays up until Ctrl-C, printing the login page's address and the users'
// passwords, so the dashboard can be opened in a browser.
package main
