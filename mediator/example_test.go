package mediator_test

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/samber/do/v2"

	"github.com/switchboard-go/switchboard/mediator"
)

type User struct {
	ID   int
	Name string
}

type GetUser struct {
	mediator.Returns[*User]
	ID int
}

type userStore struct{ names map[int]string }

type getUserHandler struct{ store *userStore }

func (h *getUserHandler) Handle(_ context.Context, q *GetUser) (*User, error) {
	name, ok := h.store.names[q.ID]
	if !ok {
		return nil, fmt.Errorf("user %d not found", q.ID)
	}
	return &User{ID: q.ID, Name: name}, nil
}

func newGetUserHandler(i do.Injector) (*getUserHandler, error) {
	return &getUserHandler{store: do.MustInvoke[*userStore](i)}, nil
}

// A request declares its response type; Send infers it.
func Example_send() {
	i := do.New()
	do.ProvideValue(i, &userStore{names: map[int]string{7: "Ada"}})
	m := mediator.New(i, mediator.Config{})
	mediator.Handle[*GetUser, *User](m, newGetUserHandler)
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}
	user, err := mediator.Send(context.Background(), m, &GetUser{ID: 7})
	fmt.Println(user.Name, err)
	_, err = mediator.Send(context.Background(), m, &GetUser{ID: 8})
	fmt.Println(err)
	// Output:
	// Ada <nil>
	// user 8 not found
}

type Ping struct {
	mediator.Returns[string]
}

// trace is a behavior that prints when a request enters and leaves it.
type trace string

func (t trace) Placement() mediator.Placement { return mediator.Placement{Name: string(t)} }

func (t trace) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	fmt.Println("enter", t)
	resp, err := next(ctx, req)
	fmt.Println("leave", t)
	return resp, err
}

// Stage always beats order; within a stage lower order is outer. Registration order does not
// matter.
func Example_stages() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Ping) (string, error) {
		fmt.Println("handler")
		return "pong", nil
	})
	m.Use(trace("post metrics"), mediator.WithStage(mediator.StagePost))
	m.Use(trace("breaker"), mediator.WithOrder(60))
	m.Use(trace("fallback"), mediator.WithOrder(30))
	m.Use(trace("auth"), mediator.WithStage(mediator.StagePre), mediator.WithOrder(90))
	m.Use(trace("retry"), mediator.WithOrder(50))
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}
	resp, _ := mediator.Send(context.Background(), m, &Ping{})
	fmt.Println(resp)
	chain, _ := mediator.Explain[*Ping](m)
	fmt.Print(chain)
	// Output:
	// enter auth
	// enter fallback
	// enter retry
	// enter breaker
	// enter post metrics
	// handler
	// leave post metrics
	// leave breaker
	// leave retry
	// leave fallback
	// leave auth
	// pong
	// auth (pre, 90)
	//   fallback (default, 30)
	//     retry (default, 50)
	//       breaker (default, 60)
	//         post metrics (post, 0)
	//           handler
}

// Query marks read-only requests.
type Query interface{ ReadOnly() }

type GetPrice struct {
	mediator.Returns[int]
	SKU string
}

func (*GetPrice) ReadOnly() {}

type SetPrice struct {
	mediator.Command
	SKU   string
	Cents int
}

// A behavior can be limited, at Build, to request types implementing an interface.
func Example_forInterface() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *GetPrice) (int, error) { return 250, nil })
	mediator.HandleFunc(m, func(context.Context, *SetPrice) (mediator.Void, error) { return mediator.Void{}, nil })
	m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
		fmt.Printf("cache lookup for %T\n", req)
		return next(ctx, req)
	}), mediator.WithName("cache"), mediator.ForInterface[Query]())
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}
	price, _ := mediator.Send(context.Background(), m, &GetPrice{SKU: "a"})
	_, err := mediator.Send(context.Background(), m, &SetPrice{SKU: "a", Cents: 300})
	fmt.Println(price, err)
	// Output:
	// cache lookup for *mediator_test.GetPrice
	// 250 <nil>
}

type OrderPlaced struct{ ID int }

func publishDemo(strategy mediator.PublishStrategy) {
	m := mediator.New(nil, mediator.Config{ErrorSink: []func(context.Context, any, error){func(_ context.Context, _ any, err error) {
		fmt.Println("sink:", err)
	}}})
	mediator.SubscribeFunc(m, func(_ context.Context, n *OrderPlaced) error {
		return fmt.Errorf("mailer down for order %d", n.ID)
	})
	mediator.SubscribeFunc(m, func(_ context.Context, n *OrderPlaced) error {
		return fmt.Errorf("ledger down for order %d", n.ID)
	})
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}
	err := mediator.PublishWith(context.Background(), m, &OrderPlaced{ID: 1}, strategy)
	fmt.Printf("%s: %v\n", strategy, errors.Join(err))
	_ = m.Close() // waits for fire-and-forget handlers
}

// Each publish strategy, chosen per call.
func Example_publishStrategies() {
	publishDemo(mediator.StopOnFirstError)
	publishDemo(mediator.ContinueOnError)
	publishDemo(mediator.Parallel(2))
	// Output:
	// stop-on-first-error: mailer down for order 1
	// continue-on-error: mailer down for order 1
	// ledger down for order 1
	// parallel: mailer down for order 1
	// ledger down for order 1
}

// Fire-and-forget returns at once; errors go to the sink and Close waits for the handlers.
func Example_fireAndForget() {
	m := mediator.New(nil, mediator.Config{ErrorSink: []func(context.Context, any, error){func(_ context.Context, _ any, err error) {
		fmt.Println("sink:", err)
	}}})
	release := make(chan struct{}) // holds the handler until the publish has been printed
	mediator.SubscribeFunc(m, func(_ context.Context, n *OrderPlaced) error {
		<-release
		return fmt.Errorf("mailer down for order %d", n.ID)
	})
	_ = m.Build()
	err := mediator.PublishWith(context.Background(), m, &OrderPlaced{ID: 2}, mediator.FireAndForget)
	fmt.Println("published:", err)
	close(release)
	fmt.Println("closed:", m.Close())
	// Output:
	// published: <nil>
	// sink: mailer down for order 2
	// closed: <nil>
}

type Countdown struct {
	mediator.Yields[int]
	From int
}

// A stream request yields an iter.Seq2; breaking out of the loop stops the producer.
func Example_stream() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleStreamFunc(m, func(_ context.Context, q *Countdown) iter.Seq2[int, error] {
		return func(yield func(int, error) bool) {
			for n := q.From; n > 0; n-- {
				if !yield(n, nil) {
					fmt.Println("producer released")
					return
				}
			}
		}
	})
	_ = m.Build()
	for n, err := range mediator.Stream(context.Background(), m, &Countdown{From: 5}) {
		fmt.Println(n, err)
		if n == 3 {
			break
		}
	}
	// Output:
	// 5 <nil>
	// 4 <nil>
	// 3 <nil>
	// producer released
}
