package mediatortest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/handlers"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/mediator/mediatortest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type Balance struct {
	mediator.Returns[int]
	Account string
}

type Paid struct{ Amount int }

type Statement struct {
	mediator.Yields[string]
}

// checkout is application code that depends only on the narrow interfaces.
func checkout(ctx context.Context, s mediator.Sender, p mediator.Publisher, account string) error {
	bal, err := mediator.Send(ctx, s, &Balance{Account: account})
	if err != nil {
		return err
	}
	if bal < 10 {
		return errors.New("insufficient funds")
	}
	return mediator.Publish(ctx, p, &Paid{Amount: 10})
}

func TestSpyRecordsAndStubs(t *testing.T) {
	spy := mediatortest.NewSpy()
	mediatortest.StubResponse[*Balance](spy, 25, nil)
	require.NoError(t, checkout(context.Background(), spy, spy, "a-1"))

	sent := mediatortest.Sent[*Balance](spy)
	require.Len(t, sent, 1)
	assert.Equal(t, "a-1", sent[0].Account)
	assert.Equal(t, []*Paid{{Amount: 10}}, mediatortest.Published[*Paid](spy))

	spy.Reset()
	mediatortest.StubSend(spy, func(_ context.Context, q *Balance) (int, error) { return 5, nil })
	assert.EqualError(t, checkout(context.Background(), spy, spy, "a-2"), "insufficient funds")
	assert.Empty(t, spy.Notifications())
	assert.Len(t, spy.Requests(), 1)
}

func TestSpyWithoutStub(t *testing.T) {
	spy := mediatortest.NewSpy()
	_, err := mediator.Send(context.Background(), spy, &Balance{})
	assert.ErrorIs(t, err, mediator.ErrNoHandler)
	for _, err := range mediator.Stream(context.Background(), spy, &Statement{}) {
		assert.ErrorIs(t, err, mediator.ErrNoHandler)
	}
	mediatortest.StubStream[*Statement](spy, "a", "b")
	var lines []string
	for l, err := range mediator.Stream(context.Background(), spy, &Statement{}) {
		require.NoError(t, err)
		lines = append(lines, l)
	}
	assert.Equal(t, []string{"a", "b"}, lines)
	assert.Len(t, spy.StreamRequests(), 2)
}

func TestWrapPassesThroughToTheMediator(t *testing.T) {
	stub := mediatortest.Returning[*Balance](42, nil)
	m := mediator.New(nil, mediator.Config{})
	mediator.Handle[*Balance, int](m, handlers.Value(stub))
	var delivered []int
	mediator.SubscribeFunc(m, func(_ context.Context, p *Paid) error {
		delivered = append(delivered, p.Amount)
		return nil
	})
	require.NoError(t, m.Build())
	spy := mediatortest.Wrap(m)
	require.NoError(t, checkout(context.Background(), spy, spy, "a-3"))
	assert.Equal(t, []int{10}, delivered)
	require.Len(t, stub.Calls(), 1)
	assert.Equal(t, "a-3", stub.Calls()[0].Account)

	var stubbed []int
	mediatortest.StubPublish(spy, func(_ context.Context, p *Paid) error { stubbed = append(stubbed, p.Amount); return nil })
	require.NoError(t, checkout(context.Background(), spy, spy, "a-4"))
	assert.Equal(t, []int{10}, delivered, "the stub took the notification")
	assert.Equal(t, []int{10}, stubbed)
}

// Code under test depends on mediator.Sender; the spy stands in for the mediator.
func ExampleSpy() {
	spy := mediatortest.NewSpy()
	mediatortest.StubResponse[*Balance](spy, 3, nil)
	err := checkout(context.Background(), spy, spy, "acct-9")
	fmt.Println(err)
	fmt.Println(mediatortest.Sent[*Balance](spy)[0].Account, len(spy.Notifications()))
	// Output:
	// insufficient funds
	// acct-9 0
}
