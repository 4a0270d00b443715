package durable

// PostgresStatements exposes the PostgreSQL statements of the store, by name, to the plan
// checks of package durable_test.
func PostgresStatements() map[string]string {
	d := postgresDialect
	return map[string]string{
		"claim":          d.claim,
		"claim_isolated": d.claimIsolated,
		"complete":       d.completeMany,
		"extend":         d.extend,
		"sweep":          d.sweep,
		"isolated_due":   d.isolatedDue,
		"unpark":         d.unpark,
		"oldest_due":     d.oldestDue,
		"enqueue":        d.insert,
		"dedupe":         d.byDedupe,
	}
}
