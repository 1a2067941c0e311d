package cost_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"encoding/json"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/cost"
)

// A cost model plugs into a server as its hooks: here the safety classifier
// over each request's new text, and a simulated service call of 1 ms
// before and after inference. A request that includes tether.timings sees
// what they cost.
func Example() {
	hooks, err := cost.New(cost.Options{Safety: true, HopLatency: time.Millisecond, PostInference: cost.PostSync})
	if err != nil {
		panic(err)
	}
	srv, err := runtime.NewServer(runtime.Options{Hooks: hooks})
	if err != nil {
		panic(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	body := `{"model":"tether-scripted","input":"Where did the ransomware come from?","include":["tether.timings"]}`
	resp, err := http.Post(hs.URL+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var r struct {
		Timings struct {
			SafetyFlags int   `json:"safety_flags"`
			HopMicros   int64 `json:"hop_us"`
		} `json:"timings"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		panic(err)
	}
	// Three hops: the model router, the safety service, billing.
	fmt.Println("flags:", r.Timings.SafetyFlags, "hops of 1 ms or more:", r.Timings.HopMicros >= 3000)
	// Output:
	// flags: 1 hops of 1 ms or more: true
}
