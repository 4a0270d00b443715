package httpcall

import (
	"net"
	"net/url"
	"reflect"
	"strings"

	"github.com/switchboard-go/switchboard/behaviors"
)

// Authority is a behaviors.KeyFunc for breaker.Config.Key (or a bulkhead's or a retry policy's
// key) that keys a *Call by the authority of its request's URL: scheme, host and port,
// lower-cased, with the scheme's default port made explicit, such as "https://api.example.com:443".
// So one breaker stands for one server: the calls to a failing host open its breaker and no
// other, whatever their paths, and "HTTPS://API.example.com" and "https://api.example.com:443"
// share one. The user information, path and query are left out, so the key names no secret
// and the number of keys stays the number of servers.
//
// A request of another type gets behaviors.TypeKey of its type, the key a registry gives it
// without a key function, so one registry can serve HTTP calls and other requests.
//
// The Transport computes a Call's key once per call, so Authority allocates nothing for it;
// for a Call sent otherwise it builds the key each time.
func Authority(req any) string {
	c, ok := req.(*Call)
	if !ok {
		return behaviors.TypeKey(reflect.TypeOf(req))
	}
	if c.key != "" {
		return c.key
	}
	if c.Request == nil {
		return ""
	}
	return authority(c.Request.URL)
}

// authority returns the key Authority gives a URL.
func authority(u *url.URL) string {
	if u == nil {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = defaultPort(scheme)
	}
	if port == "" {
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		return scheme + "://" + host
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// defaultPort returns the port a client uses for scheme when a URL names none.
func defaultPort(scheme string) string {
	switch scheme {
	case "http", "ws":
		return "80"
	case "https", "wss":
		return "443"
	}
	return ""
}
