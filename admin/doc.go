// Package admin is the operator surface of switchboard: an http.Handler, mounted by the
// application under any prefix, that lists, trips and resets circuit breakers, inspects,
// replays and discards dead letters, shows schedules and their run log (and adds, pauses,
// resumes, runs now and removes them) and the durable queue's counts, serves the embedded
// dashboard and, beside them, the metrics handler.
//
// Every API route needs an authorized principal: an Authorizer (the default checks the bearer
// tokens of Config.Token and Config.Tokens) names them, recorded as the actor of every change
// they make, and gives their Role. A viewer reads everything and changes nothing; an operator
// acts on the work too (replays and discards dead letters, cancels and runs items, pauses and
// resumes, trips and resets breakers, runs schedules now); an admin changes the
// configuration too (adds and removes schedules, sets and removes concurrency limits). A
// route that needs more than the principal's role answers 403 naming both. The dashboard
// exchanges the token once for a session cookie (HttpOnly, SameSite=Strict) that keeps the
// role, disables the actions the role may not use, and sends a CSRF token with every
// state-changing request; net/http's CrossOriginProtection refuses cross-origin browser
// requests that change state. docs/operations.md lists the routes and the role each needs.
package admin
