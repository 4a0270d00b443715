package admin_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

// The admin handler mounted under /admin/ of an application's mux, with the endpoints the
// application calls declared up front so an operator can trip one before any traffic.
func Example() {
	reg := breaker.NewRegistry(breaker.Config{})
	reg.Declare("https://billing.example/v1")

	h, err := admin.New(admin.Config{Breakers: reg, Token: "change-me-to-a-long-random-secret"})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	key := url.PathEscape("https://billing.example/v1") // one escaped path segment
	req, _ := http.NewRequest("POST", srv.URL+"/admin/api/breakers/"+key+"/trip", nil)
	req.Header.Set("Authorization", "Bearer change-me-to-a-long-random-secret")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.Status)
	_, open := reg.OpenFor("https://billing.example/v1")
	fmt.Println("open:", open, len(body) > 0)
	// Output:
	// 200 OK
	// open: true true
}
