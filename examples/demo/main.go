package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/mediator"
)

// Deliver posts one delivery to one endpoint. The endpoint deduplicates by the Delivery-Id
// header, so a delivery is safe to retry and to defer. (Not Idempotency-Key: net/http's client
// sends a request with that header again by itself when its kept-alive connection breaks before
// an answer, so the pipeline would never see the resets endpoint's resets.)
type Deliver struct {
	mediator.Command
	Seq      int    `json:"seq"`
	Endpoint string `json:"endpoint"` // the endpoint's name, which is also its breaker's key
	URL      string `json:"url"`
}

// Quote asks an endpoint for its current rate: a read, which the fallback answers with the last
// rate the endpoint gave when it cannot answer now. A stale rate is better than none.
type Quote struct {
	mediator.Returns[float64]
	Endpoint string
	URL      string
}

// refusedError is an endpoint refusing a delivery with a 4xx answer: no retry changes that, so
// it is neither retried nor deferred.
type refusedError struct{ endpoint, status string }

func (e *refusedError) Error() string {
	return fmt.Sprintf("%s refused the delivery: %s", e.endpoint, e.status)
}

// deliver is Deliver's handler: one POST through client, whose transport sends it through the
// pipeline of *httpcall.Call (retry, the endpoint's breaker, the attempt timeout).
func deliver(client *http.Client) func(context.Context, *Deliver) (mediator.Void, error) {
	return func(ctx context.Context, d *Deliver) (mediator.Void, error) {
		body, _ := json.Marshal(map[string]int{"seq": d.Seq})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
		if err != nil {
			return mediator.Void{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Delivery-Id", strconv.Itoa(d.Seq))
		resp, err := client.Do(req)
		if err != nil {
			return mediator.Void{}, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return mediator.Void{}, &refusedError{endpoint: d.Endpoint, status: resp.Status}
		}
		return mediator.Void{}, nil
	}
}

// quote is Quote's handler: one GET through client; it remembers each endpoint's last rate for
// the fallback.
func quote(client *http.Client, last *rates) func(context.Context, *Quote) (float64, error) {
	return func(ctx context.Context, q *Quote) (float64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, q.URL, nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64))
		if err != nil {
			return 0, err
		}
		rate, err := strconv.ParseFloat(string(bytes.TrimSpace(b)), 64)
		if err != nil {
			return 0, fmt.Errorf("%s quoted %q: %w", q.Endpoint, b, err)
		}
		last.set(q.Endpoint, rate)
		return rate, nil
	}
}

// errNoRate is the fallback declining: the endpoint has never quoted a rate.
var errNoRate = errors.New("no rate seen yet")

func main() {
	duration := flag.Duration("duration", time.Minute, "how long the dispatcher sends (a summary follows); Ctrl-C ends it early")
	rate := flag.Int("rate", 20, "requests sent a second, spread over the endpoints")
	addr := flag.String("addr", "127.0.0.1:0", "loopback address of the admin dashboard, /metrics and the health probes")
	dir := flag.String("dir", "", "directory of the SQLite queue and the log file (default: a new temporary directory, kept)")
	quit := flag.Bool("quit", false, "exit after the summary instead of serving the dashboard until Ctrl-C")
	flag.Parse()
	if err := validFlags(*duration, *rate, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(2)
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "switchboard-demo-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			os.Exit(1)
		}
		*dir = d
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { // a second Ctrl-C ends the process at once
		<-ctx.Done()
		stop()
	}()
	opt := options{duration: *duration, rate: *rate, addr: *addr, dir: *dir, quit: *quit, progress: isTerminal(os.Stdout)}
	if _, err := run(ctx, os.Stdout, opt); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// validFlags refuses a run too short to show its phases, a rate the loopback cannot mean and an
// address other than loopback: the dashboard's token is printed on the screen.
func validFlags(d time.Duration, rate int, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	switch {
	case err != nil:
		return fmt.Errorf("-addr %q is not host:port: %v", addr, err)
	case host != "localhost" && !isLoopback(host):
		return fmt.Errorf("-addr %q is not a loopback address: the demo serves its dashboard on this machine only (127.0.0.1:PORT)", addr)
	case d < 3*time.Second:
		return fmt.Errorf("-duration %v is too short: the story (bursts, an outage and its recovery, a replay) needs at least 3s", d)
	case rate < 1 || rate > 1000:
		return fmt.Errorf("-rate %d is out of range: give 1 to 1000 requests a second", rate)
	}
	return nil
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// newToken returns a fresh admin token.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// keyOf keys a *httpcall.Call by its endpoint: httpcall.Authority's key (one breaker per
// server), named for the endpoint there, so the dashboard and the logs say "outage" rather
// than a loopback port.
func keyOf(names map[string]string) func(req any) string {
	return func(req any) string {
		a := httpcall.Authority(req)
		if n, ok := names[a]; ok {
			return n
		}
		return a
	}
}
