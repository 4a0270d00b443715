package fallback_test

import (
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/behaviors/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The request, errors and helpers these tests share with the other behavior packages'.
type (
	statusErr    = testkit.StatusErr
	transientErr = testkit.TransientErr
	Reply        = testkit.Reply
	Call         = testkit.Call
	script       = testkit.Script
)

var (
	errBoom     = errors.New("boom")
	endpointKey = testkit.EndpointKey
	build       = testkit.Build
)
