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
// A Call whose URL names no scheme or no host (a relative URL, "https:///x") gets "", as
// AuthorityOf does: it names no server, and its round trip fails before it reaches one.
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

// AuthorityOf returns the key Authority gives a *Call to rawURL: its scheme, host and port,
// lower-cased, with the scheme's default port made explicit, such as
// "https://api.example.com:443". It is for keys computed outside the pipeline of *Call from a
// URL the request carries, so that they name the same breaker as the per-host breaker the
// request's calls go through: a durable registration's key function over its own request,
//
//	func(d *Deliver) string { return httpcall.AuthorityOf(d.URL) }
//
// parks a stored delivery on the breaker of the host it posts to.
//
// It returns "" when rawURL does not parse or names no scheme or no host: such a URL names no
// server, so no per-host breaker guards a request to it, and "" is the key that says so (a
// durable registration's key function that returns "" leaves its item under no breaker).
func AuthorityOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return authority(u)
}

// authority returns the key Authority gives a URL: "" when it names no scheme or no host.
func authority(u *url.URL) string {
	if u == nil || u.Scheme == "" {
		return ""
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
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
