package runtime

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/runtime/internal/lifecycle"
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
			if p := sp.st.Phase(); p != lifecycle.Ended {
				t.Fatalf("detach first %v: state %v after Shutdown and the window, want ended (a window timer fired)", detachFirst, p)
			}
		})
	}
}

// TestSuspensionRules: what the client of a suspended rollout is told of
// its events in each phase of its life (lifecycle's rules, checked over
// every state value in that package), as the codes it reads, and how the
// connection, lane and credentials an event comes with become its sender.
// The rollout is brought to each phase by the events that lead there.
func TestSuspensionRules(t *testing.T) {
	t.Parallel()
	const (
		notFound  = "response_not_found"
		notParked = "response_not_suspended"
		laneBusy  = "stream_suspended"
		mismatch  = "stream_id_mismatch"
		completed = "response_already_completed"
		notActive = "response_not_active"
		durable   = "steering_not_supported"
		asleep    = "asleep"
		ok        = "ok"
		nothing   = "-"
	)
	type L = lifecycle.Event
	here, other := &session{}, &session{}
	durableRoute := []L{lifecycle.Park, lifecycle.Hold, lifecycle.Written, lifecycle.Pause}
	routes := map[lifecycle.Phase]struct {
		checkpoints bool
		events      []L
	}{
		lifecycle.Running:    {false, nil},
		lifecycle.Pausing:    {false, []L{lifecycle.Park}},
		lifecycle.Parked:     {false, []L{lifecycle.Park, lifecycle.Pause}},
		lifecycle.Ended:      {false, []L{lifecycle.End}},
		lifecycle.Settled:    {false, []L{lifecycle.End, lifecycle.Settle}},
		lifecycle.Expired:    {false, []L{lifecycle.Drop, lifecycle.Expire}},
		lifecycle.Fenced:     {true, []L{lifecycle.Fence}},
		lifecycle.HandedOver: {true, append(slices.Clone(durableRoute), lifecycle.HandOver)},
		lifecycle.Hibernated: {true, append(slices.Clone(durableRoute), lifecycle.Hibernate)},
	}
	// reach is a suspension in phase p, reporting to here on lane "a"
	// (but expired: detached), created with the credentials "key".
	reach := func(p lifecycle.Phase) *suspension {
		r := routes[p]
		sp := &suspension{srv: &Server{}, id: "resp_1", lane: "a", creds: "key", sess: here, st: lifecycle.New(r.checkpoints, false)}
		for _, ev := range r.events {
			if v, _ := sp.applyLocked(ev, here, "", ""); v != lifecycle.Allow {
				t.Fatalf("on the way to %v: %v is %v in %v", p, ev, v, sp.st.Phase())
			}
		}
		if sp.st.Phase() != p {
			t.Fatalf("the route to %v leads to %v", p, sp.st.Phase())
		}
		return sp
	}
	// send is what the client reads of ev sent in phase p from sess on
	// lane with creds.
	send := func(p lifecycle.Phase, ev L, sess *session, lane, creds string) string {
		sp := reach(p)
		before := sp.st
		v, perr := sp.applyLocked(ev, sess, lane, creds)
		switch {
		case perr != nil:
			if !v.Refused() || sp.st != before {
				t.Errorf("%v %v: refused (%s) by %v, the state %v", p, ev, perr.Code, v, sp.st.Phase())
			}
			return perr.Code
		case v.Refused():
			t.Errorf("%v %v: %v, with no refusal for the client", p, ev, v)
		case v == lifecycle.Asleep:
			return asleep
		case v == lifecycle.Ignore:
			return nothing
		}
		return ok
	}
	events := []L{lifecycle.Append, lifecycle.Cancel, lifecycle.Fork, lifecycle.Create, lifecycle.Resume, lifecycle.Steer}
	want := map[lifecycle.Phase][]string{
		//                     append     cancel    fork       create    resume    steer
		lifecycle.Running:    {notParked, ok, notParked, ok, ok, ok},
		lifecycle.Pausing:    {notParked, ok, notParked, ok, ok, ok},
		lifecycle.Parked:     {ok, ok, ok, laneBusy, ok, ok},
		lifecycle.Ended:      {notFound, notFound, notFound, ok, ok, completed},
		lifecycle.Settled:    {notFound, notFound, notFound, ok, notFound, completed},
		lifecycle.Expired:    {notFound, notFound, notFound, ok, notFound, completed},
		lifecycle.Fenced:     {nothing, nothing, notFound, ok, ok, notActive},
		lifecycle.HandedOver: {nothing, nothing, notFound, ok, ok, notActive},
		lifecycle.Hibernated: {asleep, asleep, notFound, ok, ok, notActive},
	}
	if len(want) != lifecycle.NumPhases {
		t.Fatalf("the table covers %d phases; there are %d", len(want), lifecycle.NumPhases)
	}
	for p, row := range want {
		for i, ev := range events {
			var got string
			switch ev {
			case lifecycle.Resume:
				got = send(p, ev, other, "a", "key")
			default:
				got = send(p, ev, here, "a", "")
			}
			if got != row[i] {
				t.Errorf("%v, %v: %s, want %s", p, ev, got, row[i])
			}
		}
		// Who sends it.
		for i, ev := range events[:3] { // append, cancel, fork
			wantOther, wantLane := notFound, mismatch
			switch row[i] {
			case nothing, asleep: // whoever sends it on its lane
				wantOther = row[i]
			}
			switch row[i] {
			case notFound, nothing:
				wantLane = row[i] // gone is gone, whatever the lane; ignored is ignored
			}
			if got := send(p, ev, other, "a", ""); got != wantOther {
				t.Errorf("%v, %v from another connection: %s, want %s", p, ev, got, wantOther)
			}
			if got := send(p, ev, here, "b", ""); got != wantLane {
				t.Errorf("%v, %v on another lane: %s, want %s", p, ev, got, wantLane)
			}
		}
		if got := send(p, lifecycle.Steer, other, "a", ""); got != notFound {
			t.Errorf("%v, a steer from another connection: %s, want %s", p, got, notFound)
		}
		if got := send(p, lifecycle.Create, other, "a", ""); got != ok {
			t.Errorf("%v, a create from another connection: %s, want it queued", p, got)
		}
		if got := send(p, lifecycle.Resume, here, "a", "key"); got != notFound {
			t.Errorf("%v, a resume from the connection it reports to: %s, want %s", p, got, notFound)
		}
		if got := send(p, lifecycle.Resume, other, "a", "another key"); got != notFound {
			t.Errorf("%v, a resume with other credentials: %s, want %s", p, got, notFound)
		}
		for _, ev := range []L{lifecycle.Drop, lifecycle.Settle} {
			if got := send(p, ev, other, "a", "key"); got != nothing {
				t.Errorf("%v, %v from a connection it does not report to: %s, want it ignored", p, ev, got)
			}
		}
	}
	// A durable rollout's pause is not steered: its checkpoint would not
	// keep the input.
	sp := &suspension{srv: &Server{}, id: "resp_1", lane: "a", creds: "key", sess: here, st: lifecycle.New(true, false)}
	sp.applyLocked(lifecycle.Park, nil, "", "")
	if _, perr := sp.decideLocked(lifecycle.Steer, here, "a", ""); perr == nil || perr.Code != durable {
		t.Errorf("a steer of a durable rollout at its pause: %v, want %s", perr, durable)
	}
	// The multi-agent beta's client answers a call before the pause: the
	// append waits for it (taken as it parks), refused to no one; from
	// another connection or lane it is refused as ever.
	for _, p := range []lifecycle.Phase{lifecycle.Running, lifecycle.Pausing} {
		for _, c := range []struct {
			sess *session
			lane string
			want lifecycle.Verdict
			code string
		}{{here, "a", lifecycle.Early, ""}, {other, "a", lifecycle.RefuseNotFound, notFound}, {here, "b", lifecycle.RefuseLane, mismatch}} {
			sp := &suspension{srv: &Server{}, id: "resp_1", lane: "a", creds: "key", sess: here, st: lifecycle.New(false, true)}
			for _, ev := range routes[p].events {
				sp.applyLocked(ev, here, "", "")
			}
			v, perr := sp.applyLocked(lifecycle.Append, c.sess, c.lane, "")
			if v != c.want || c.code == "" && (perr != nil || v.Refused()) || c.code != "" && (perr == nil || perr.Code != c.code) {
				t.Errorf("%v, a beta client's early append from %v on %q: %v (%v), want %v %s", p, c.sess == here, c.lane, v, perr, c.want, c.code)
			}
		}
	}
}
