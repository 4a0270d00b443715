package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"time"

	"github.com/samber/do/v2"

	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/mediator"
)

// Product is one entry of the catalog.
type Product struct {
	SKU   string
	Name  string
	Cents int
}

// Catalog is the dependency the handlers get from the injector.
type Catalog struct {
	products []Product
	stock    map[string]int
	added    int // AddToCart commands the handler has run
}

func newCatalog() *Catalog {
	return &Catalog{
		products: []Product{
			{"tea", "green tea", 450},
			{"mug", "blue mug", 900},
			{"pot", "tea pot", 2400},
			{"cup", "espresso cup", 650},
		},
		stock: map[string]int{"tea": 10, "mug": 1, "pot": 3, "cup": 6},
	}
}

func (c *Catalog) find(sku string) (Product, bool) {
	for _, p := range c.products {
		if p.SKU == sku {
			return p, true
		}
	}
	return Product{}, false
}

// GetPrice is a request: its response is the price in cents, which Send returns as an int.
type GetPrice struct {
	mediator.Returns[int]
	SKU string
}

// AddToCart is a command: it has no response, so its response type is mediator.Void.
type AddToCart struct {
	mediator.Command
	Customer string
	SKU      string
	Qty      int
}

// Validate is called by the validation behavior before the handler runs.
func (a *AddToCart) Validate() error {
	if a.Qty <= 0 {
		return fmt.Errorf("qty must be at least 1, got %d", a.Qty)
	}
	return nil
}

// ItemAdded is a notification: any number of handlers may receive it.
type ItemAdded struct {
	Customer string
	SKU      string
	Qty      int
}

// ListProducts is a stream request: it yields the products costing at most MaxCents.
type ListProducts struct {
	mediator.Yields[Product]
	MaxCents int
}

// RemoveFromCart is a command no handler was registered for.
type RemoveFromCart struct {
	mediator.Command
	SKU string
}

// cartHandler handles AddToCart and publishes ItemAdded for it.
type cartHandler struct {
	catalog *Catalog
	pub     mediator.Publisher
}

func (h *cartHandler) Handle(ctx context.Context, a *AddToCart) (mediator.Void, error) {
	if _, ok := h.catalog.find(a.SKU); !ok {
		return mediator.Void{}, fmt.Errorf("no product %q", a.SKU)
	}
	h.catalog.added++
	return mediator.Void{}, mediator.Publish(ctx, h.pub, &ItemAdded{Customer: a.Customer, SKU: a.SKU, Qty: a.Qty})
}

func run(ctx context.Context, out io.Writer) error {
	i := do.New()
	do.ProvideValue(i, newCatalog())
	// ContinueOnError delivers a notification to every handler even when one fails, and
	// returns their errors joined; the default, StopOnFirstError, stops at the first failure.
	m := mediator.New(i, mediator.Config{PublishStrategy: mediator.ContinueOnError})

	// Handlers are constructors the injector calls once, at Build, with their dependencies.
	mediator.Handle[*GetPrice, int](m, func(i do.Injector) (mediator.HandlerFunc[*GetPrice, int], error) {
		catalog := do.MustInvoke[*Catalog](i)
		return func(_ context.Context, q *GetPrice) (int, error) {
			p, ok := catalog.find(q.SKU)
			if !ok {
				return 0, fmt.Errorf("no product %q", q.SKU)
			}
			return p.Cents, nil
		}, nil
	})
	mediator.Handle[*AddToCart, mediator.Void](m, func(i do.Injector) (*cartHandler, error) {
		return &cartHandler{catalog: do.MustInvoke[*Catalog](i), pub: do.MustInvoke[mediator.Publisher](i)}, nil
	})
	mediator.Subscribe[*ItemAdded](m, func(i do.Injector) (mediator.NotificationHandlerFunc[*ItemAdded], error) {
		catalog := do.MustInvoke[*Catalog](i)
		return func(_ context.Context, n *ItemAdded) error {
			if catalog.stock[n.SKU] < n.Qty {
				return fmt.Errorf("stock: only %d %s left, %d wanted", catalog.stock[n.SKU], n.SKU, n.Qty)
			}
			catalog.stock[n.SKU] -= n.Qty
			fmt.Fprintf(out, "  [stock]     reserved %d %s, %d left\n", n.Qty, n.SKU, catalog.stock[n.SKU])
			return nil
		}, nil
	})
	mediator.SubscribeFunc(m, func(_ context.Context, n *ItemAdded) error {
		fmt.Fprintf(out, "  [analytics] %s wants %d %s\n", n.Customer, n.Qty, n.SKU)
		return nil
	})
	mediator.HandleStream[*ListProducts, Product](m, func(i do.Injector) (mediator.StreamHandlerFunc[*ListProducts, Product], error) {
		catalog := do.MustInvoke[*Catalog](i)
		return func(ctx context.Context, q *ListProducts) iter.Seq2[Product, error] {
			return func(yield func(Product, error) bool) {
				for _, p := range catalog.products {
					if ctx.Err() != nil {
						yield(Product{}, ctx.Err())
						return
					}
					if p.Cents <= q.MaxCents && !yield(p, nil) {
						return // the caller stopped ranging
					}
				}
			}
		}, nil
	})
	// Validation runs before anything else of the pipeline, for the request types that have a
	// Validate method (here AddToCart).
	m.Use(validation.New())
	// Build resolves every handler once and reports every problem at once.
	if err := m.Build(); err != nil {
		return err
	}
	defer m.Close()

	fmt.Fprintln(out, "1. Send a request, get its typed response:")
	cents, err := mediator.Send(ctx, m, &GetPrice{SKU: "tea"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  GetPrice{tea} = %d cents (an int, no cast)\n\n", cents)

	fmt.Fprintln(out, "2. Send a command; its handler publishes ItemAdded to two handlers:")
	if _, err := mediator.Send(ctx, m, &AddToCart{Customer: "ada", SKU: "tea", Qty: 2}); err != nil {
		return err
	}
	fmt.Fprintln(out, "  AddToCart{ada, 2 tea} done (response mediator.Void{})")
	fmt.Fprintln(out)

	fmt.Fprintln(out, "3. Publish with ContinueOnError: the stock handler fails, analytics still runs:")
	_, err = mediator.Send(ctx, m, &AddToCart{Customer: "bob", SKU: "mug", Qty: 2})
	fmt.Fprintf(out, "  AddToCart{bob, 2 mug} failed: %v\n\n", err)

	fmt.Fprintln(out, "4. Stream the products up to 10.00, and stop after two:")
	n := 0
	for p, err := range mediator.Stream(ctx, m, &ListProducts{MaxCents: 1000}) {
		if err != nil {
			return err
		}
		n++
		fmt.Fprintf(out, "  %d: %s (%s) %d cents\n", n, p.SKU, p.Name, p.Cents)
		if n == 2 {
			break // ends the stream: the handler's loop sees yield return false
		}
	}
	fmt.Fprintln(out)

	fmt.Fprintln(out, "5. Typed errors from Send:")
	catalog := do.MustInvoke[*Catalog](i)
	before := catalog.added
	_, err = mediator.Send(ctx, m, &AddToCart{Customer: "ada", SKU: "tea"})
	var invalid *validation.Error
	if errors.As(err, &invalid) {
		fmt.Fprintf(out, "  AddToCart{Qty: 0}: *validation.Error for %v: %v (errors.Is ErrInvalid: %t; handler calls: %d before, %d after)\n",
			invalid.Request, invalid.Err, errors.Is(err, validation.ErrInvalid), before, catalog.added)
	}
	_, err = mediator.Send(ctx, m, &RemoveFromCart{SKU: "tea"})
	var missing *mediator.NoHandlerError
	if errors.As(err, &missing) {
		fmt.Fprintf(out, "  RemoveFromCart: *mediator.NoHandlerError for %v (errors.Is ErrNoHandler: %t)\n",
			missing.Type, errors.Is(err, mediator.ErrNoHandler))
	}
	return nil
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
