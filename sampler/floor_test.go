package sampler_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// instant is a backend that answers at once.
type instant struct{ r *sampler.Renderer }

func (b instant) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	return sampler.NewScripted(b.r, sampler.Timing{}).Sample(ctx, req, emit)
}

// TestFloored: a backend faster than the timing model is held to the model's
// time (TTFT, then one token per 1/TPS), in fake time.
func TestFloored(t *testing.T) {
	t.Parallel()
	r, err := sampler.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		f := sampler.NewFloored(instant{r}, r, sampler.Timing{TTFT: 100 * time.Millisecond, TPS: 10})
		req := &sampler.Request{Items: protocol.Items{&protocol.Message{Role: protocol.RoleUser,
			Content: protocol.Contents{&protocol.InputText{Text: "Please say this back to me."}}}}}
		start := time.Now()
		var times []time.Duration
		res, err := f.Sample(context.Background(), req, func(d sampler.Delta) {
			if d.Kind == sampler.TextDelta {
				times = append(times, time.Since(start))
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(times) != res.OutputTokens || len(times) < 3 {
			t.Fatalf("%d tokens, result says %d", len(times), res.OutputTokens)
		}
		for i, at := range times {
			if want := 100*time.Millisecond + time.Duration(i)*100*time.Millisecond; at != want {
				t.Fatalf("token %d at %v, want %v", i, at, want)
			}
		}
		if res.PromptTokens == 0 {
			t.Fatal("no prompt tokens counted")
		}
	})
}
