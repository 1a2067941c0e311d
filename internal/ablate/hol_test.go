package ablate

import (
	"testing"
	"time"
)

// TestRunHOL: both transports stream every lane through the simulated
// link, lossless and lossy, and every lane's tokens are counted.
func TestRunHOL(t *testing.T) {
	res, err := RunHOL(t.Context(), HOLConfig{Lanes: 4, Loss: []float64{0, 0.05}, Delay: 2 * time.Millisecond,
		TPS: 400, Duration: time.Second, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("%d runs, want 4", len(res))
	}
	for _, r := range res {
		t.Logf("%s at %g loss: %d tokens, %d responses, lag p50 %.1f ms p99 %.1f ms max %.1f ms, per lane %v",
			r.Transport, r.Loss, r.Tokens, r.Responses, r.LagP50MS, r.LagP99MS, r.LagMaxMS, r.LaneP99MS)
		if r.Tokens == 0 || r.Responses < int64(r.Lanes) || len(r.LaneP99MS) != 4 {
			t.Errorf("%s at %g loss: %d tokens, %d responses over %d lanes", r.Transport, r.Loss, r.Tokens, r.Responses, r.Lanes)
		}
		if r.LagP99MS < r.LagP50MS || r.LagMaxMS < r.LagP99MS {
			t.Errorf("%s at %g loss: quantiles out of order: %v %v %v", r.Transport, r.Loss, r.LagP50MS, r.LagP99MS, r.LagMaxMS)
		}
	}
}
