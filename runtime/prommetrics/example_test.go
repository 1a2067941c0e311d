package prommetrics_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/prommetrics"
)

// A server observed by Metrics counts its responses, served on /metrics.
func Example() {
	m := prommetrics.New()
	srv, err := runtime.NewServer(runtime.Options{Observer: m})
	if err != nil {
		panic(err)
	}
	srv.Handle("GET /metrics", m.Handler())
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	resp, err := http.Post(hs.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"tether-scripted","input":"Hello"}`))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()

	resp, err = http.Get(hs.URL + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "tether_responses_total{") {
			fmt.Println(sc.Text())
		}
	}
	// Output:
	// tether_responses_total{design="stateless",state="none",status="completed",transport="http"} 1
}
