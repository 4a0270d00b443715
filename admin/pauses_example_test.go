package admin_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// An operator pauses a request name through the admin API of a *durable.Queue (an
// admin.Pauses): every instance stops claiming its items until it is resumed.
func ExamplePauses() {
	dir, _ := os.MkdirTemp("", "admin-pauses")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{Logger: zap.NewNop()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	m := mediator.New(nil, mediator.Config{})
	_ = m.Build()
	h, err := admin.New(admin.Config{Queue: q, Sender: m, Token: "change-me-to-a-long-random-secret"})
	if err != nil {
		fmt.Println(err)
		return
	}
	post := func(path, body string) (int, string) {
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer change-me-to-a-long-random-secret")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, strings.TrimSpace(w.Body.String())
	}
	fmt.Println(post("/api/pauses", `{"kind": "name", "target": "billing.send-invoice"}`))
	code, _ := post("/api/pauses", `{"kind": "name", "target": "billing.send-invoice", "reason": "provider migration"}`)
	fmt.Println(code)
	pauses, _ := q.Pauses(ctx)
	fmt.Println(pauses[0].Target, "paused by", pauses[0].Actor, "for", pauses[0].Reason)
	fmt.Println(post("/api/pauses/resume", `{"kind": "name", "target": "billing.send-invoice"}`))
	// Output:
	// 400 {"error":"field \"reason\" is required: a pause says why; nothing was paused"}
	// 200
	// billing.send-invoice paused by admin for provider migration
	// 200 {"resumed":true}
}
