package httpcall_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/mediator"
)

// rawServer accepts connections on a loopback listener and hands each to serve, until the test
// ends. It returns the server's URL.
func rawServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var conns []net.Conn
	connc := make(chan net.Conn)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connc <- c
			go serve(c)
		}
	}()
	stop := make(chan struct{})
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for {
			select {
			case c := <-connc:
				conns = append(conns, c)
			case <-stop:
				return
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		close(stop)
		<-collected
		for _, c := range conns {
			c.Close()
		}
		<-done
	})
	return "http://" + ln.Addr().String()
}

// readRequest reads the request head of an HTTP/1.1 client from c.
func readRequest(c net.Conn) {
	buf := make([]byte, 4096)
	_, _ = c.Read(buf)
}

// transportErr sends a GET to url through a pipeline without behaviors whose base is tr, and
// returns the error of the handler (what the pipeline's behaviors see, and a caller of
// mediator.Send) and of an http.Client's Do through the Transport (what a caller of the client
// sees); when the call succeeds, the error of reading its body.
func transportErr(t *testing.T, tr *http.Transport, url string, timeout time.Duration) (handler, client error) {
	t.Helper()
	defer tr.CloseIdleConnections()
	m := mediator.New(nil, mediator.Config{})
	httpcall.Register(m, tr)
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := mediator.Send(ctx, m, &httpcall.Call{Request: req})
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	handler = err
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err = (&http.Client{Transport: httpcall.NewTransport(m, httpcall.Config{})}).Do(req)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	return handler, err
}

func TestTransportErrorsAreClassified(t *testing.T) {
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		u := "http://" + ln.Addr().String()
		ln.Close()
		return u
	}
	for _, tc := range []struct {
		name      string
		url       func(t *testing.T) string
		tr        func() *http.Transport
		timeout   time.Duration
		transport bool
		isTimeout bool
	}{
		{name: "refused", url: func(*testing.T) string { return closed() }, transport: true},
		{name: "reset", url: func(t *testing.T) string {
			return rawServer(t, func(c net.Conn) {
				readRequest(c)
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			})
		}, transport: true},
		{name: "closed before a response", url: func(t *testing.T) string {
			return rawServer(t, func(c net.Conn) { readRequest(c); c.Close() })
		}, transport: true},
		{name: "closed mid-header", url: func(t *testing.T) string {
			return rawServer(t, func(c net.Conn) {
				readRequest(c)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n")
				c.Close()
			})
		}, transport: true},
		{name: "closed mid-body", url: func(t *testing.T) string {
			return rawServer(t, func(c net.Conn) {
				readRequest(c)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
				c.Close()
			})
		}, transport: true},
		{name: "hangs", url: func(t *testing.T) string {
			return rawServer(t, func(c net.Conn) { readRequest(c) })
		}, timeout: 50 * time.Millisecond, isTimeout: true},
		{name: "hangs past ResponseHeaderTimeout", url: func(t *testing.T) string {
			return rawServer(t, func(c net.Conn) { readRequest(c) })
		}, tr: func() *http.Transport { return &http.Transport{ResponseHeaderTimeout: 50 * time.Millisecond} }, isTimeout: true},
		{name: "TLS handshake timeout", url: func(t *testing.T) string {
			u := rawServer(t, func(c net.Conn) { readRequest(c) })
			return "https" + u[len("http"):]
		}, tr: func() *http.Transport {
			return &http.Transport{TLSHandshakeTimeout: 50 * time.Millisecond, TLSClientConfig: &tls.Config{}}
		}, isTimeout: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &http.Transport{}
			if tc.tr != nil {
				tr = tc.tr()
			}
			handler, client := transportErr(t, tr, tc.url(t), tc.timeout)
			for _, err := range []error{handler, client} {
				if err == nil {
					t.Fatal("no error")
				}
				if got := behaviors.IsTransport(err); got != tc.transport {
					t.Errorf("IsTransport(%v) = %v, want %v", err, got, tc.transport)
				}
				if got := behaviors.IsTimeout(err); got != tc.isTimeout {
					t.Errorf("IsTimeout(%v) = %v, want %v", err, got, tc.isTimeout)
				}
				if errors.Is(err, context.Canceled) {
					t.Errorf("%v is a cancellation", err)
				}
			}
		})
	}
}
