// Pacing from outside: N SSE responses of one long call argument from a
// tether serve --tps TPS; each delta timed on arrival; (last-first) against
// (n-1)/TPS, n the tokens the deltas carried (o200k).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tether-run/tether/sampler"
)

func main() {
	base, tps := os.Args[1], 1000.0
	r, _ := sampler.NewRenderer()
	arg := strings.Repeat("alpha beta gamma delta ", 250)
	for i := range 20 {
		body, _ := json.Marshal(map[string]any{"model": "tether-scripted", "stream": true, "store": false,
			"input": fmt.Sprintf("Run %d.\ncall: probe {\"x\":%q}", i, arg),
			"tools": []any{map[string]any{"type": "function", "name": "probe", "parameters": map[string]any{"type": "object"}}}})
		resp, err := http.Post(base+"/v1/responses", "application/json", bytes.NewReader(body))
		if err != nil {
			panic(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		var first, last time.Time
		n := 0
		for sc.Scan() {
			line := sc.Text()
			d, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var ev struct{ Type, Delta string }
			json.Unmarshal([]byte(d), &ev)
			if ev.Type == "response.function_call_arguments.delta" {
				now := time.Now()
				if first.IsZero() {
					first = now
				}
				last = now
				n += max(r.Count(ev.Delta), 1)
			}
		}
		resp.Body.Close()
		want := time.Duration(float64(n-1) / tps * float64(time.Second))
		fmt.Printf("%d tokens: %v against %v: %+.2f%%\n", n, last.Sub(first).Round(time.Microsecond), want, 100*(float64(last.Sub(first))/float64(want)-1))
	}
}
