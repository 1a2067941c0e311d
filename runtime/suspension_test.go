package runtime

import (
	"context"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/protocol"
)

// TestShutdownStartsNoResumeWindow: Shutdown leaves no resume-window timer
// behind, whether the rollout was detached before it or by a session torn
// down during it (whose teardown must not start a new window). Fake time.
func TestShutdownStartsNoResumeWindow(t *testing.T) {
	for _, detachFirst := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			const window = time.Minute
			srv, err := NewServer(Options{ResumeWindow: window})
			if err != nil {
				t.Fatal(err)
			}
			sess := newSession(srv, nil, httptest.NewRequest("GET", "/v1/responses", nil), protocol.EncodingJSON, nil)
			req, perr := protocol.DecodeCreateRequest([]byte(`{"model":"tether-scripted","store":false,"input":"call: read_file {}"}`))
			if perr != nil {
				t.Fatal(perr)
			}
			ro, perr := srv.prepare(req, nil, time.Now(), protocol.Timings{})
			if perr != nil {
				t.Fatal(perr)
			}
			sp, _, perr := srv.suspend(ro, sess, "")
			if perr != nil {
				t.Fatal(perr)
			}
			sp.start()
			synctest.Wait()
			if !sp.parkedOn(sess) {
				t.Fatal("the rollout did not park")
			}
			if detachFirst {
				sp.detach(sess)
			}
			if err := srv.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !detachFirst {
				sp.detach(sess) // a session's teardown, after Shutdown began
			}
			time.Sleep(2 * window)
			synctest.Wait()
			sp.mu.Lock()
			defer sp.mu.Unlock()
			if sp.state != suspEnded {
				t.Fatalf("detach first %v: state %v after Shutdown and the window, want ended (a window timer fired)", detachFirst, sp.state)
			}
		})
	}
}
