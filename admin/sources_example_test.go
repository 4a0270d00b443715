package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

// A service with a breaker registry keyed by host and another keyed by request type shows
// both; a key both know is tripped in the registry the request names.
func ExampleConfig_breakerRegistries() {
	byHost := breaker.NewRegistry(breaker.Config{})
	byHost.Declare("payments")
	byType := breaker.NewRegistry(breaker.Config{})
	byType.Declare("payments")

	h, err := admin.New(admin.Config{
		Breakers:          byHost, // listed as "default"
		BreakerRegistries: map[string]admin.Breakers{"types": byType},
		Token:             "change-me-to-a-long-random-secret",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(path string) {
		req, _ := http.NewRequest("POST", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer change-me-to-a-long-random-secret")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer res.Body.Close()
		var body struct{ Error, Registry, State string }
		_ = json.NewDecoder(res.Body).Decode(&body)
		if body.Error != "" {
			fmt.Println(res.Status, body.Error)
			return
		}
		fmt.Println(res.Status, body.Registry, body.State)
	}
	post("/api/breakers/payments/trip")
	post("/api/breakers/payments/trip?registry=types")
	_, hostOpen := byHost.OpenFor("payments")
	_, typeOpen := byType.OpenFor("payments")
	fmt.Println("by host open:", hostOpen, "by type open:", typeOpen)
	// Output:
	// 400 Bad Request breaker "payments" is in registries "default" and "types": say which registry
	// 200 OK types open
	// by host open: false by type open: true
}
