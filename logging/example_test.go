package logging_test

import (
	"context"
	"errors"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/switchboard-go/switchboard/logging"
	"github.com/switchboard-go/switchboard/mediator"
)

// An application that logs with log/slog gives switchboard a zap logger and slog a handler
// over the same zap core (zapslog, from go.uber.org/zap/exp), so both write one stream with one
// configuration.
func Example_slog() {
	defer slog.SetDefault(slog.Default())                        // (the example restores the default it replaces)
	logger := zap.NewExample()                                   // the application's zap logger (JSON to stdout here)
	slog.SetDefault(slog.New(zapslog.NewHandler(logger.Core()))) // the application's slog calls go to the same core

	m := mediator.New(nil, mediator.Config{Logger: logger}) // the library logs to zap
	m.Use(logging.New(logging.Config{Logger: logger}))
	mediator.SubscribeFunc(m, func(context.Context, *Shipped) error { return errors.New("mailer down") })
	if err := m.Build(); err != nil {
		panic(err)
	}
	slog.Info("order shipped", "order", 7)
	_ = mediator.PublishWith(context.Background(), m, &Shipped{Order: 7}, mediator.FireAndForget)
	_ = m.Close()
	// Output:
	// {"level":"info","msg":"order shipped","order":7}
	// {"level":"error","msg":"mediator: notification handler failed","notification":"*logging_test.Shipped","error":"mailer down"}
}

// Shipped is a notification.
type Shipped struct{ Order int }
