package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tether-run/tether/internal/redistest"
)

// bgEvent is what TestBackgroundKill reads of a background response's
// events.
type bgEvent struct {
	Type     string `json:"type"`
	Seq      int    `json:"sequence_number"`
	Response struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"response"`
}

// readEvents reads server-sent events from body until it ends or until
// returns true.
func readEvents(body io.Reader, until func(bgEvent) bool) ([]bgEvent, error) {
	var evs []bgEvent
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev bgEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return evs, err
		}
		evs = append(evs, ev)
		if until != nil && until(ev) {
			break
		}
	}
	return evs, sc.Err()
}

// TestBackgroundKill: two servers on one Redis. Background responses are
// created, streamed, on A; each stream is cut after a few events and
// resumed on B while A still produces; then A is killed (SIGKILL) mid-
// response. B's streams go on to each response's end, with no gap and no
// repeat: B takes each over once A's lease has run out and runs it again
// (tether-scripted says the same whenever asked).
func TestBackgroundKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two tether serve processes and a redis-server: not in -short")
	}
	t.Parallel()
	const n = 20
	redis := redistest.Start(t)
	args := []string{"--store", redis.URL(), "--lease-ttl", killLease.String(), "--tps", "10"}
	a, b := startServeProcess(t, args...), startServeProcess(t, args...)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	input := strings.Repeat("the parser reads a token and looks one ahead ", 4)

	ids := make([]string, n)
	cuts := make([]int, n)
	for i := range n {
		body := fmt.Sprintf(`{"model":"tether-scripted","background":true,"stream":true,"store":false,"input":%q}`, input)
		req, _ := http.NewRequestWithContext(ctx, "POST", a.base+"/v1/responses", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := readEvents(resp.Body, func(ev bgEvent) bool { return ev.Type == "response.output_text.delta" })
		resp.Body.Close() // cut: A runs on
		if err != nil || len(evs) == 0 || evs[0].Response.Status != "queued" {
			t.Fatalf("create %d on A: %v %+v", i, err, evs)
		}
		ids[i], cuts[i] = evs[0].Response.ID, evs[len(evs)-1].Seq
	}

	var wg sync.WaitGroup
	ends := make([]string, n)
	errs := make([]error, n)
	followed := make(chan struct{}, n)
	for i := range n {
		wg.Go(func() {
			url := fmt.Sprintf("%s/v1/responses/%s?stream=true&starting_after=%d", b.base, ids[i], cuts[i])
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				errs[i] = fmt.Errorf("resume on B: %d %s", resp.StatusCode, b)
				return
			}
			next := cuts[i] + 1
			evs, err := readEvents(resp.Body, func(ev bgEvent) bool {
				if ev.Seq == next && next == cuts[i]+1 {
					followed <- struct{}{}
				}
				if ev.Seq != next && errs[i] == nil {
					errs[i] = fmt.Errorf("event %s has sequence_number %d, want %d: a gap or a repeat", ev.Type, ev.Seq, next)
				}
				next = ev.Seq + 1
				return false
			})
			if err != nil && errs[i] == nil {
				errs[i] = err
			}
			if len(evs) > 0 {
				ends[i] = evs[len(evs)-1].Type
			}
		})
	}
	for range n { // every stream on B has had an event A made since its cut
		select {
		case <-followed:
		case <-ctx.Done():
			t.Fatal("B's streams did not follow A's responses")
		}
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	wg.Wait()
	completed := 0
	for i := range n {
		switch {
		case errs[i] != nil:
			t.Errorf("response %d: %v", i, errs[i])
		case ends[i] != "response.completed":
			t.Errorf("response %d ended on B with %q", i, ends[i])
		default:
			completed++
		}
	}
	taken := 0
	for len(b.logs) > 0 {
		switch line := <-b.logs; {
		case strings.Contains(line, "background response taken over"):
			taken++
		case strings.Contains(line, "diverged"):
			t.Errorf("B: %s", line)
		}
	}
	if taken == 0 {
		t.Error("B took over none of A's responses: every one had ended before the kill")
	}
	t.Logf("%d of %d background responses completed on B (%d taken over there), %v after A was killed", completed, n, taken, time.Since(killed).Round(time.Millisecond))
}
