package ratelimit_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/behaviors/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The request and helpers these tests share with the other behavior packages'.
type (
	Reply  = testkit.Reply
	Call   = testkit.Call
	script = testkit.Script
)

var (
	endpointKey = testkit.EndpointKey
	build       = testkit.Build
)
