package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/samber/do/v2"

	"github.com/switchboard-go/switchboard/mediator"
)

// Order is what the shop stores.
type Order struct {
	ID    int
	Total int
}

// PlaceOrder is a request whose response is the placed order.
type PlaceOrder struct {
	mediator.Returns[*Order]
	Customer string
	Total    int
}

// OrderPlaced is a notification published after an order is placed.
type OrderPlaced struct {
	Order *Order
}

// orders is a dependency the handler gets from the injector.
type orders struct{ next int }

type placeOrderHandler struct {
	orders *orders
	pub    mediator.Publisher
}

func (h *placeOrderHandler) Handle(ctx context.Context, q *PlaceOrder) (*Order, error) {
	if q.Total <= 0 {
		return nil, errors.New("total must be positive")
	}
	h.orders.next++
	o := &Order{ID: h.orders.next, Total: q.Total}
	return o, mediator.PublishWith(ctx, h.pub, &OrderPlaced{Order: o}, mediator.ContinueOnError)
}

var traceID = mediator.NewContextKey[string]("trace-id")

// step is a behavior that prints when a request enters and leaves it.
type step struct {
	out  io.Writer
	name string
}

func (s step) Placement() mediator.Placement { return mediator.Placement{Name: s.name} }

func (s step) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	fmt.Fprintf(s.out, "  -> %s\n", s.name)
	resp, err := next(ctx, req)
	fmt.Fprintf(s.out, "  <- %s (err=%v)\n", s.name, err)
	return resp, err
}

func run(out io.Writer) error {
	i := do.New()
	do.ProvideValue(i, &orders{})
	m := mediator.New(i, mediator.Config{}) // also provides itself to i as Sender, Publisher and Streamer

	mediator.Handle[*PlaceOrder, *Order](m, func(i do.Injector) (*placeOrderHandler, error) {
		return &placeOrderHandler{orders: do.MustInvoke[*orders](i), pub: do.MustInvoke[mediator.Publisher](i)}, nil
	})
	for _, name := range []string{"email", "ledger", "analytics"} {
		mediator.SubscribeFunc(m, func(ctx context.Context, n *OrderPlaced) error {
			fmt.Fprintf(out, "  [%s] order %d (trace %s)\n", name, n.Order.ID, traceID.GetOr(ctx, "-"))
			return nil
		})
	}
	// Registered in a scrambled order on purpose: stage and order decide the chain.
	uses := []struct {
		b    mediator.Behavior
		opts []mediator.Option
	}{
		{step{out, "metrics"}, []mediator.Option{mediator.WithStage(mediator.StagePost)}},
		{step{out, "breaker"}, []mediator.Option{mediator.WithOrder(60)}},
		{mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
			fmt.Fprintln(out, "  -> trace (sets trace-id t-1)")
			return next(traceID.With(ctx, "t-1"), req)
		}), []mediator.Option{mediator.WithStage(mediator.StagePre), mediator.WithName("trace")}},
		{step{out, "fallback"}, []mediator.Option{mediator.WithOrder(30)}},
		{step{out, "retry"}, []mediator.Option{mediator.WithOrder(50)}},
	}
	for _, u := range uses {
		m.Use(u.b, u.opts...)
	}
	if err := m.Build(); err != nil {
		return err
	}
	defer m.Close()

	chain, err := mediator.Explain[*PlaceOrder](m)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "pipeline of *PlaceOrder:\n%s\n", chain)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fmt.Fprintln(out, "send PlaceOrder{Total: 42}:")
	o, err := mediator.Send(ctx, m, &PlaceOrder{Customer: "ada", Total: 42})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "placed order %d, total %d\n\n", o.ID, o.Total)

	fmt.Fprintln(out, "send PlaceOrder{Total: 0}:")
	_, err = mediator.Send(ctx, m, &PlaceOrder{Customer: "bob"})
	fmt.Fprintf(out, "refused: %v\n", err)
	return nil
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
