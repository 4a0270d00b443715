// Command prometheus is a mediator with the Prometheus client alone, counting its requests by
// hand: TestObserverBinarySizes compares the binary of the metrics program with its binary.
package main

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-go/switchboard/mediator"
)

// Ping is the request the program sends.
type Ping struct{ mediator.Returns[string] }

func main() {
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests_total", Help: "Requests."}, []string{"outcome"})
	reg.MustRegister(requests)
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Ping) (string, error) { return "pong", nil })
	if err := m.Build(); err != nil {
		panic(err)
	}
	if _, err := mediator.Send(context.Background(), m, &Ping{}); err == nil {
		requests.WithLabelValues("success").Inc()
	}
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
}
