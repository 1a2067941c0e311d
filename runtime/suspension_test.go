package runtime

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestShutdownStartsNoResumeWindow: Shutdown leaves no resume-window timer
// behind, whether the rollout was detached before it or by a session torn
// down during it (whose teardown must not start a new window). Fake time.
func TestShutdownStartsNoResumeWindow(t *testing.T) {
	for _, detachFirst := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			const window = time.Minute
			srv, err := NewServer(Options{Suspension: SuspensionOptions{ResumeWindow: window}})
			if err != nil {
				t.Fatal(err)
			}
			sp, sess := parkOne(t, srv, prepared(t, srv, `{"model":"tether-scripted","store":false,"input":"call: read_file {}"}`))
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

// TestSuspensionRules drives a suspension through every event in every
// state and checks the state it moves to, or the code it refuses with; then
// how the sender changes that: another connection, another lane, other
// credentials, a timer that lost a race. The expectations are written out
// here apart from suspRules, as doc.go states them.
func TestSuspensionRules(t *testing.T) {
	t.Parallel()
	const (
		notFound  = "response_not_found"
		notParked = "response_not_suspended"
		laneBusy  = "stream_suspended"
		mismatch  = "stream_id_mismatch"
		completed = "response_already_completed"
		same      = "="
		nothing   = "-"
	)
	// Per state, per event in suspEvent's order: the state it moves to
	// ("=": it stays), a refusal's code, or "-" when it is ignored. Client
	// events come from the attached connection on the rollout's lane, a
	// resume from another connection with the same credentials, the
	// resume window's end while detached.
	events := []suspEvent{evPark, evPause, evAppend, evAnswered, evCancel, evFork, evCreate, evResume, evDrop, evTimeout, evExpire, evEnd, evSettle, evShutdown, evSteer}
	want := map[suspState][]string{
		//            park       pause     append     answered   cancel     fork       create    resume    drop  timeout    expire     end      settle     shutdown   steer
		suspRunning: {"pausing", nothing, notParked, nothing, "running", notParked, same, same, same, nothing, "expired", "ended", nothing, "running", same},
		suspPausing: {nothing, "parked", notParked, nothing, "running", notParked, same, same, same, nothing, "expired", "ended", nothing, "running", same},
		suspParked:  {nothing, nothing, same, "running", "running", same, laneBusy, same, same, "running", "expired", "ended", nothing, "running", same},
		suspEnded:   {nothing, nothing, notFound, nothing, notFound, notFound, same, same, same, nothing, "expired", nothing, "settled", nothing, completed},
		suspSettled: {nothing, nothing, notFound, nothing, notFound, notFound, same, notFound, nothing, nothing, nothing, nothing, nothing, nothing, completed},
		suspExpired: {nothing, nothing, notFound, nothing, notFound, notFound, same, notFound, nothing, nothing, nothing, nothing, nothing, nothing, completed},
	}
	if len(want) != int(numSuspStates) || len(events) != int(numSuspEvents) {
		t.Fatalf("the table covers %d states and %d events; there are %d and %d", len(want), len(events), numSuspStates, numSuspEvents)
	}
	here, other := &session{}, &session{}
	// run sends ev in state st from sess on lane with creds, the rollout
	// attached to attached; it returns what happened, as the table says it.
	run := func(st suspState, ev suspEvent, attached, sess *session, lane, creds string) string {
		sp := &suspension{id: "resp_1", lane: "a", creds: "key", state: st, sess: attached}
		r, perr := sp.decideLocked(ev, sess, lane, creds)
		switch {
		case perr != nil:
			if r.v == allow || r.v == ignore {
				t.Errorf("%v %v: refused (%s) by a rule that does not refuse", st, ev, perr.Code)
			}
			if sp.state != st {
				t.Errorf("%v %v: refused, and the state moved to %v", st, ev, sp.state)
			}
			return perr.Code
		case r.v == ignore:
			if sp.state != st {
				t.Errorf("%v %v: ignored, and the state moved to %v", st, ev, sp.state)
			}
			return nothing
		case sp.state == st:
			return same
		}
		return sp.state.String()
	}
	for st, row := range want {
		for i, ev := range events {
			var got string
			switch ev {
			case evResume:
				got = run(st, ev, here, other, "a", "key")
			case evExpire:
				got = run(st, ev, nil, nil, "", "")
			case evAppend, evCancel, evFork, evCreate, evDrop, evSettle, evSteer:
				got = run(st, ev, here, here, "a", "key")
			default:
				got = run(st, ev, here, nil, "", "")
			}
			if w := row[i]; got != w && !(w == st.String() && got == same) {
				t.Errorf("%v, %v: %s, want %s", st, ev, got, w)
			}
		}
	}

	// Who sends it.
	for st := range numSuspStates {
		for _, ev := range []suspEvent{evAppend, evCancel, evFork} {
			if got := run(st, ev, here, other, "a", "key"); got != notFound {
				t.Errorf("%v, %v from another connection: %s, want %s", st, ev, got, notFound)
			}
			wantLane := mismatch
			if want[st][slices.Index(events, ev)] == notFound {
				wantLane = notFound // gone is gone, whatever the lane
			}
			if got := run(st, ev, here, here, "b", "key"); got != wantLane {
				t.Errorf("%v, %v on another lane: %s, want %s", st, ev, got, wantLane)
			}
		}
		if got := run(st, evSteer, here, other, "", ""); got != notFound {
			t.Errorf("%v, a steer from another connection: %s, want %s", st, got, notFound)
		}
		if w := want[st][slices.Index(events, evSteer)]; w == same {
			if got := run(st, evSteer, here, here, "b", ""); got != same {
				t.Errorf("%v, a steer naming no lane (or another): %s, want it taken", st, got)
			}
		}
		if got := run(st, evCreate, here, other, "a", "key"); got != same {
			t.Errorf("%v, a create from another connection: %s, want it queued", st, got)
		}
		if got := run(st, evResume, here, here, "a", "key"); got != notFound {
			t.Errorf("%v, a resume from the connection it reports to: %s, want %s", st, got, notFound)
		}
		if got := run(st, evResume, here, other, "a", "another key"); got != notFound {
			t.Errorf("%v, a resume with other credentials: %s, want %s", st, got, notFound)
		}
		for _, ev := range []suspEvent{evDrop, evSettle} {
			if got := run(st, ev, here, other, "a", "key"); got != nothing {
				t.Errorf("%v, %v from a connection it does not report to: %s, want it ignored", st, ev, got)
			}
		}
		if got := run(st, evExpire, here, nil, "", ""); got != nothing {
			t.Errorf("%v, the resume window's end while attached: %s, want it ignored", st, got)
		}
	}
}
