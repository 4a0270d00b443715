// Package chaos is the core of the chaos and pressure harness: it runs job systems on
// PostgreSQL through the same scenarios of faults and pressure and scores how each holds up.
// It follows the method of the public PostgreSQL job-queue benchmark
// (github.com/hardbyte/postgresql-job-queue-benchmarking, docs/method.md), written anew here.
//
// # The method
//
// Each system under test is a set of replicas (System) doing the same work, a 1 ms handler
// (HandlerTime) on 256-byte payloads (PayloadSize), at the same offered rate on the same
// PostgreSQL. A scenario is an ordered list of phases (Phase, Scenario); each phase has a kind
// and a duration:
//
//   - warmup, clean, recovery: the offered rate; warmup is left out of every figure, the first
//     clean phase is the reference recovery is measured against.
//   - high-load: 1.5× the offered rate (HighLoadMultiplier).
//   - idle-in-tx: one transaction holding an XID for the phase (vacuum starved).
//   - active-readers: REPEATABLE READ connections scanning the hot tables over and over.
//   - kill-worker / start-worker: a replica killed without a graceful stop, then started.
//   - repeated-kill: a replica killed and restarted every period.
//   - postgres-restart: PostgreSQL stopped for half the phase, started for the rest.
//   - pg-backend-kill: the system's backends terminated at a rate.
//   - pool-exhaustion: idle connections held against the system's database.
//
// The Scheduler runs the phases in order on a Clock, starting each phase kind's Fault as the
// phase begins and stopping it as it ends (also when the scenario is aborted, so the fault
// gives back what it took), and aborts a scenario that runs past its timeout, marking it so.
// Run puts it together with a System: it starts the replicas, enqueues jobs with ids at the
// offered rate times the phase's factor, records every acknowledgement and completion
// (Recorder), and after the last phase waits up to a drain timeout for what is outstanding.
//
// ChaosScenarios are the method's five chaos scenarios (30 s warmup, 60 s baseline, the fault,
// 60 s recovery); PressureCells its four pressure cells (10 min warmup, a clean baseline, an
// hour or two of idle-in-tx, high load, readers or a burst, 30 min recovery).
//
// # The measures
//
// Per phase and system: completed jobs/s; pickup latency (enqueue to handler start) p50, p95
// and p99, per phase and over a rolling 30 s window (RollingPickup); and, from a Diagnoser,
// the dead tuples and size of the hot tables and the top wait events. Per run, and per phase
// by enqueue time: jobs lost (acknowledged, never completed by the end of the drain) and jobs
// run twice (completed more than once; those whose completions carry distinct attempt numbers
// are also counted as retries the system recorded, the rest are silent duplicates). After each
// fault or pressure phase, the recovery time: how long after the phase ends the throughput
// over a sliding 10 s window (RecoveryWindow) is back to 90 % (RecoveryShare) of the clean
// phase's; the last such phase's is the run's.
//
// # The pass rule and the scorecard
//
// A cell (a system in a scenario, Judge) passes when all of these hold:
//
//   - the scenario ran to its end: no timeout, no fault or system error;
//   - 0 jobs lost;
//   - recovered to ≥ 90 % of clean throughput within the scenario's RecoveryBound after its
//     last fault or pressure phase: 60 s for the chaos scenarios, 30 min for the pressure
//     cells (the length of their recovery phase).
//
// Jobs run twice are reported but do not fail a cell: the systems are at-least-once. A
// Scorecard gives chaos n/5 and pressure n/4 per system, and WriteMarkdown prints the
// scorecards side by side with each system's clean throughput as a ratio to the first's.
//
// # The systems and the server
//
// Package pgchaos implements the faults of the PostgreSQL phase kinds and the Diagnoser on a
// server the harness may stop and start; package replicas runs switchboard and River as
// replica processes of benchmarks/cmd/chaosreplica, each enqueued into by a client in the
// harness's own process. benchmarks/cmd/chaos runs the scorecard, and make chaos runs it on a
// server of its own with durable settings.
package chaos
