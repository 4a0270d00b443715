// Package pgchaos is the PostgreSQL side of the chaos harness: the faults of the phase kinds
// that act on the server (idle-in-tx, active-readers, pg-backend-kill, pool-exhaustion,
// postgres-restart) and the Diagnoser, which samples the systems' backends' wait events and
// reads the hot tables' dead tuples and sizes at the end of each phase.
package pgchaos
