package chaos

import "time"

// The method's phase durations: chaos scenarios are short (a fault's effect shows within a
// minute), pressure cells long (bloat and horizon effects take tens of minutes to build).
const (
	chaosWarmup = 30 * time.Second
	chaosPhase  = 60 * time.Second
)

func chaosScenario(name string, fault ...Phase) Scenario {
	ps := []Phase{{Label: "warmup", Kind: Warmup, Duration: chaosWarmup},
		{Label: "baseline", Kind: Clean, Duration: chaosPhase}}
	ps = append(ps, fault...)
	ps = append(ps, Phase{Label: "recovery", Kind: Clean, Duration: chaosPhase})
	return Scenario{Name: name, Class: Chaos, Phases: ps, RecoveryBound: chaosPhase}
}

// ChaosScenarios are the five chaos scenarios of the method, in the scorecard's order: a
// replica killed and restarted, PostgreSQL restarted, a replica killed every 20 s for two
// minutes, two backends terminated per second, 300 connections held idle. Each runs 30 s of
// warmup and 60 s of clean baseline first and 60 s of clean recovery last, and passes when
// the system is back to 90 % of its baseline throughput within that recovery minute.
func ChaosScenarios() []Scenario {
	return []Scenario{
		chaosScenario("chaos_crash_recovery",
			Phase{Label: "kill", Kind: KillWorker, Duration: chaosPhase, Instance: 0},
			Phase{Label: "restart", Kind: StartWorker, Duration: chaosPhase, Instance: 0}),
		chaosScenario("chaos_postgres_restart",
			Phase{Label: "restart", Kind: PostgresRestart, Duration: chaosPhase}),
		chaosScenario("chaos_repeated_kills",
			Phase{Label: "repeated", Kind: RepeatedKill, Duration: 2 * chaosPhase, Instance: 0, Period: 20 * time.Second}),
		chaosScenario("chaos_pg_backend_kill",
			Phase{Label: "kills", Kind: PGBackendKill, Duration: chaosPhase, Rate: 2}),
		chaosScenario("chaos_pool_exhaustion",
			Phase{Label: "exhaustion", Kind: PoolExhaustion, Duration: chaosPhase, IdleConns: 300}),
	}
}

func pressureCell(name string, clean, stress, recovery time.Duration, p Phase) Scenario {
	p.Duration = stress
	return Scenario{Name: name, Class: Pressure, Phases: []Phase{
		{Label: "warmup", Kind: Warmup, Duration: 10 * time.Minute},
		{Label: "clean_1", Kind: Clean, Duration: clean},
		p,
		{Label: "recovery_1", Kind: Recovery, Duration: recovery},
	}, RecoveryBound: recovery}
}

// PressureCells are the four pressure cells of the method, in the scorecard's order: an
// idle-in-transaction holder for an hour, 1.5× the offered rate for two hours, four
// REPEATABLE READ readers for an hour, and a 45-minute burst of high load. Each passes when
// the system is back to 90 % of its clean throughput within its recovery phase.
func PressureCells() []Scenario {
	return []Scenario{
		pressureCell("idle_in_tx_saturation", 60*time.Minute, 60*time.Minute, 30*time.Minute,
			Phase{Label: "idle_1", Kind: IdleInTx}),
		pressureCell("sustained_high_load", 30*time.Minute, 120*time.Minute, 30*time.Minute,
			Phase{Label: "pressure_1", Kind: HighLoad}),
		pressureCell("active_readers", 30*time.Minute, 60*time.Minute, 30*time.Minute,
			Phase{Label: "readers_1", Kind: ActiveReaders, Readers: 4}),
		pressureCell("event_delivery_burst", 15*time.Minute, 45*time.Minute, 30*time.Minute,
			Phase{Label: "pressure_1", Kind: HighLoad}),
	}
}

// Scaled returns the scenario with every duration (phases, periods, recovery bound, timeout)
// divided by div, for a quick run that keeps the shape of the full one; div ≤ 1 returns it as
// it is.
func (s Scenario) Scaled(div int) Scenario {
	if div <= 1 {
		return s
	}
	d := time.Duration(div)
	out := s
	out.Phases = make([]Phase, len(s.Phases))
	for i, p := range s.Phases {
		p.Duration /= d
		p.Period /= d
		out.Phases[i] = p
	}
	out.RecoveryBound /= d
	out.Timeout /= d
	return out
}
