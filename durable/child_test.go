package durable_test

const (
	childEnv        = "SWITCHBOARD_DURABLE_CHILD"
	childBackendEnv = "SWITCHBOARD_DURABLE_CHILD_BACKEND"
	childTargetEnv  = "SWITCHBOARD_DURABLE_CHILD_TARGET"
)

func runChild(mode string) int { return 2 }
