package hedge_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/behaviors/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The request and helpers these tests share with the other behavior packages'.
type (
	statusErr = testkit.StatusErr
	Reply     = testkit.Reply
	Call      = testkit.Call
)

var (
	endpointKey = testkit.EndpointKey
	build       = testkit.Build
)
