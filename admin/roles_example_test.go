package admin_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

// A read-only token for a monitoring script beside the admin's: the script reads the
// breakers, and a change it tries is refused with 403 saying why.
func ExampleBearerToken() {
	reg := breaker.NewRegistry(breaker.Config{})
	reg.Declare("billing")

	h, err := admin.New(admin.Config{Breakers: reg,
		Token: "change-me-to-a-long-random-secret", // the principal "admin", an admin
		Tokens: []admin.BearerToken{
			{Token: "the-monitoring-scripts-own-secret", Name: "grafana", Role: admin.RoleViewer},
		}})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, method := range []string{"GET", "POST"} {
		path := map[string]string{"GET": "/api/breakers/billing", "POST": "/api/breakers/billing/trip"}[method]
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer the-monitoring-scripts-own-secret")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			body = []byte("…")
		}
		fmt.Printf("%s %s: %s %s\n", method, path, res.Status, bytes.TrimSpace(body))
	}
	// Output:
	// GET /api/breakers/billing: 200 OK …
	// POST /api/breakers/billing/trip: 403 Forbidden {"error":"forbidden: grafana is a viewer; tripping a breaker needs the operator role"}
}
