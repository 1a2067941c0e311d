package clienttools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tether-run/tether/protocol"
)

// MaxBranches bounds the branches of one Branch (the server's bound on a
// response.fork's stream_ids).
const MaxBranches = 64

// A Branch is how one branch of Client.Branch goes on from the pause.
type Branch struct {
	// Output answers each call of the pause; nil runs them with Funcs.
	Output func(call Call) (string, error)
	// Funcs run the branch's calls after the pause (and the pause's,
	// without Output): each branch may act on an environment of its own.
	// Nil: the Rollout's.
	Funcs []Func
	// OnEvent and OnCall, if set, see the branch's events and calls in
	// place of the Rollout's (which still see the shared prefix's): a
	// caller tells the branches apart by them. Nil: the Rollout's.
	OnEvent func(protocol.Event)
	OnCall  func(Call)
}

// Branch runs ro to its first pause on the client's calls, then branches
// it there into len(branches) rollouts, each of which answers the pause's
// calls its own way and runs on to its end: a best-of-n or tree search
// over one tool call, or n rollouts collected from one prefix.
//
// In ModeSuspend the branches are forks: one response.fork clones the
// parked rollout onto n lanes of the connection, and the shared prefix is
// neither sent nor rendered again; the original is cancelled then. In
// ModeTurns each branch is a response on a lane of its own that names the
// paused turn as previous_response_id (every lane's latest response stays
// in the connection's cache). Over WebTransport each branch is a stream
// of the root's connection (a stream is a lane), where a suspended
// rollout is forked by a response.fork sent on the branch's stream. Other
// modes are not supported.
//
// Every branch takes a lane of the connection and a response in flight
// (tether serve's --max-lanes and --max-inflight bound them: 64 branches
// need 65 of each, the original's lane included).
//
// Each Result is the whole rollout of its branch: the shared output
// before the pause, then the branch's own; its Usage and Server timings
// count the shared prefix's sampling too, and its Elapsed runs from the
// prefix's request. In ModeSuspend its Turns have one more than an
// unbranched run's: the fork's, from the fork to its pause on the same
// calls, whose Tools is the branch's answer to them.
//
// OnEvent and OnCall, the Rollout's and each Branch's, are called one at
// a time, from the branches' goroutines.
func (c *Client) Branch(ctx context.Context, ro Rollout, branches []Branch) ([]*Result, error) {
	n := len(branches)
	switch {
	case ro.Request == nil:
		return nil, errors.New("clienttools: Rollout.Request is nil")
	case n < 1 || n > MaxBranches:
		return nil, fmt.Errorf("clienttools: %d branches: want 1 to %d", n, MaxBranches)
	case ro.Mode != ModeSuspend && ro.Mode != ModeTurns:
		return nil, fmt.Errorf("clienttools: branching runs in modes suspend and turns, not %s", ro.Mode)
	}
	var callbacks sync.Mutex // the callbacks run one at a time
	ro.OnEvent, ro.OnCall = serialized(&callbacks, ro.OnEvent), serialized(&callbacks, ro.OnCall)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One connection carries every lane: it decodes what any of them shows.
	shown := ro
	for _, br := range branches {
		if br.OnEvent != nil {
			shown.OnEvent = br.OnEvent
		}
	}
	rl, err := c.dialBranches(ctx, n, shown.filter())
	if err != nil {
		return nil, err
	}
	defer rl.close()

	// The shared prefix: the first turn, up to its pause, on the root lane;
	// never eager: the branches run the pause's calls, each its own way.
	rootClient := *c
	rootClient.Eager = false
	root := rootClient.newRun(ro)
	defer root.exec.wait()
	req := root.request(ro.Request.Input)
	req.Store = ptr(false)
	if ro.Mode == ModeSuspend {
		req.Suspend = ptr(true)
	}
	start := time.Now()
	sent, err := rl.root.send(ctx, &protocol.CreateEvent{StreamID: rl.root.streamID(), Request: req})
	root.beginTurn(start, sent)
	if err != nil {
		return nil, err
	}
	end, err := root.readResponse(ctx, func() (protocol.Event, frameCost, error) { return rl.root.next(ctx) })
	if err != nil {
		return nil, err
	}
	calls := pausedCalls(ro.Mode, end)
	if len(calls) == 0 {
		return nil, fmt.Errorf("the rollout ended (%s) before a call of the client's: nothing to branch", end.Response.Status)
	}

	results := make([]*Result, n)
	errs := make([]error, n)
	var wg, forked sync.WaitGroup // forked: each branch has its fork (or failed)
	forked.Add(n)
	for i, br := range branches {
		bro := ro
		if br.Funcs != nil {
			bro.Funcs = br.Funcs
		}
		if br.OnEvent != nil {
			bro.OnEvent = serialized(&callbacks, br.OnEvent)
		}
		if br.OnCall != nil {
			bro.OnCall = serialized(&callbacks, br.OnCall)
		}
		b := c.newRun(bro)
		b.res.Output = slices.Clone(root.res.Output)
		b.res.Turns = slices.Clone(root.res.Turns)
		b.turn, b.last = &b.res.Turns[len(b.res.Turns)-1], root.last // the pause's calls are its turn's
		if ro.Mode == ModeTurns {
			b.addUsage(end.Response) // the paused turn, a response of its own
		} else {
			// A fork's response counts the prefix's usage itself, which
			// its pause repeats, but times only its own work: the prefix's
			// timings, up to the pause, are the original's.
			b.paid, b.rootPaid = root.paid, root.rootPaid
			b.res.Server.Add(root.paidTime)
		}
		wg.Go(func() {
			defer b.exec.wait()
			answer := func() (protocol.Items, error) { return b.answerPause(ctx, calls, br.Output) }
			errs[i] = b.branch(ctx, rl.lanes[i], end.Response.ID, answer, rl.forkHere, forked.Done)
			b.res.Elapsed = time.Since(root.start)
			if errs[i] == nil {
				errs[i] = b.endErr()
			}
			results[i] = &b.res
		})
	}
	if ro.Mode == ModeSuspend {
		if !rl.forkHere {
			// One response.fork names every branch's lane; the lane's
			// order puts the cancel after it.
			_, err = rl.root.send(ctx, &protocol.ForkEvent{StreamID: rootLane, ResponseID: end.Response.ID, StreamIDs: rl.ids})
		} else {
			forked.Wait() // the streams are not ordered with one another
		}
		if err == nil {
			// Every fork has its copy: the original is done with.
			_, err = rl.root.send(ctx, &protocol.CancelEvent{StreamID: rl.root.streamID(), ResponseID: end.Response.ID})
		}
		if err != nil {
			cancel()
		}
	}
	wg.Wait()
	if err != nil {
		return results, err
	}
	return results, errors.Join(errs...)
}

// rootLane is the lane of the rollout a Branch branches.
const rootLane = "root"

// newRun is a run of ro on c.
func (c *Client) newRun(ro Rollout) *run {
	limit := c.MaxParallel
	if limit <= 0 {
		limit = DefaultMaxParallel
	}
	return &run{c: c, ro: ro, exec: newExecutor(ro.Funcs, limit, ro.Approve), start: time.Now()}
}

// pausedCalls are the client's calls a pause (suspend) or a turn's end
// (turns) left, or none if the rollout ended.
func pausedCalls(mode Mode, end *protocol.ResponseEvent) []protocol.Call {
	if mode == ModeTurns {
		if end.Response.Status != protocol.ResponseCompleted {
			return nil
		}
		return openCalls(end.Response)
	}
	ra := end.Response.RequiredAction
	if ended(end) || ra == nil {
		return nil
	}
	calls := make([]protocol.Call, len(ra.SubmitToolOutputs.ToolCalls))
	for i, pc := range ra.SubmitToolOutputs.ToolCalls {
		calls[i] = pc.Call()
	}
	return calls
}

// answerPause is a branch's outputs for the pause's calls: output's, or
// its Funcs'.
func (r *run) answerPause(ctx context.Context, calls []protocol.Call, output func(Call) (string, error)) (protocol.Items, error) {
	if output == nil {
		return r.runCalls(ctx, calls)
	}
	outs := make(protocol.Items, len(calls))
	for k, pc := range calls {
		call := Call{Turn: len(r.res.Turns) - 1, Type: pc.Type, CallID: pc.CallID, Name: pc.Name, Namespace: pc.Namespace, Arguments: pc.Input}
		call.Output, call.Err = output(call)
		if call.Type == protocol.ItemMCPApprovalRequest {
			call.Approved = call.Err == nil
		}
		outs[k] = call.output()
	}
	return outs, nil
}

// branch runs one branch on its lane from the pause of response paused,
// whose calls answer answers, to its end. A fork comes by itself, unless
// forkHere: then the branch asks for it on its lane, at once (the
// original waits parked meanwhile), and answers at the fork's pause.
// forked is called once the branch has its fork's pause (or cannot have
// it).
func (r *run) branch(ctx context.Context, l branchLane, paused string, answer func() (protocol.Items, error), forkHere bool, forked func()) error {
	var once sync.Once
	defer once.Do(forked)
	var ev any // what to send first: the turn, or for a fork nothing (or the fork)
	var outs protocol.Items
	switch {
	case r.ro.Mode == ModeTurns:
		once.Do(forked)
		var err error
		if outs, err = answer(); err != nil {
			return err
		}
		req := r.request(outs)
		req.Store, req.PreviousResponseID = ptr(false), paused
		ev = &protocol.CreateEvent{StreamID: l.streamID(), Request: req}
	case forkHere:
		ev = &protocol.ForkEvent{ResponseID: paused}
	}
	first := true
	for {
		start := time.Now()
		var sent frameCost
		if ev != nil {
			var err error
			if sent, err = l.send(ctx, ev); err != nil {
				return err
			}
		}
		r.beginTurn(start, sent)
		end, err := r.readResponse(ctx, func() (protocol.Event, frameCost, error) { return l.next(ctx) })
		if err != nil {
			return err
		}
		once.Do(forked)
		if r.ro.Mode == ModeSuspend && ended(end) {
			r.addUsage(end.Response)
			_, err := l.send(ctx, &protocol.ProcessedEvent{ResponseID: end.Response.ID})
			return err
		}
		if r.ro.Mode == ModeTurns {
			r.addUsage(end.Response)
		}
		calls := pausedCalls(r.ro.Mode, end)
		if len(calls) == 0 {
			return nil
		}
		switch {
		case first && r.ro.Mode == ModeSuspend:
			outs, err = answer() // the fork's pause: the branch's own answer
		default:
			outs, err = r.runCalls(ctx, calls)
		}
		if err != nil {
			return err
		}
		first = false
		if r.ro.Mode == ModeSuspend {
			ev = &protocol.AppendEvent{StreamID: l.streamID(), ResponseID: end.Response.ID, Input: outs}
			continue
		}
		req := r.request(outs)
		req.Store, req.PreviousResponseID = ptr(false), end.Response.ID
		ev = &protocol.CreateEvent{StreamID: l.streamID(), Request: req}
	}
}

// serialized is f called under mu, so that no two callbacks that share mu
// run at once; nil stays nil.
func serialized[T any](mu *sync.Mutex, f func(T)) func(T) {
	if f == nil {
		return nil
	}
	return func(v T) {
		mu.Lock()
		defer mu.Unlock()
		f(v)
	}
}

// branchLane is a lane a Branch talks on: a lane of a shared WebSocket,
// or a stream of a WebTransport connection.
type branchLane interface {
	streamID() string // what events name the lane by ("" on a stream)
	send(ctx context.Context, ev any) (frameCost, error)
	next(ctx context.Context) (protocol.Event, frameCost, error)
}

// branchLanes are a Branch's lanes: the root's and one per branch.
type branchLanes struct {
	root     branchLane
	lanes    []branchLane
	ids      []string // the branches' stream ids (WebSocket)
	forkHere bool     // each branch forks onto its own lane (WebTransport)
	close    func()   // ends the connection, and joins its reader
}

// dialBranches connects for a Branch of n: one WebSocket whose lanes one
// reader demultiplexes, or one WebTransport connection with a stream per
// lane.
func (c *Client) dialBranches(ctx context.Context, n int, keep eventFilter) (*branchLanes, error) {
	if c.Transport == TransportWebTransport {
		w, err := c.dialWebTransport(ctx, keep)
		if err != nil {
			return nil, err
		}
		rl := &branchLanes{root: w, forkHere: true}
		rl.close = func() {
			for _, l := range rl.lanes {
				l.(*wtConn).str.Close()
			}
			w.close()
		}
		for range n {
			s, err := openStream(ctx, w.sess, c.Encoding, keep)
			if err != nil {
				rl.close()
				return nil, err
			}
			rl.lanes = append(rl.lanes, s)
		}
		return rl, nil
	}
	ws, err := c.dialWebSocket(ctx, keep)
	if err != nil {
		return nil, err
	}
	// One goroutine reads every lane's events and hands each to its lane.
	m := newMux(ws, n)
	go m.read(ctx)
	rl := &branchLanes{root: m.byID[rootLane], ids: m.lanes, close: func() { ws.close(); <-m.done }}
	for i := range n {
		rl.lanes = append(rl.lanes, m.lane(i))
	}
	return rl, nil
}

func (l *muxLane) streamID() string { return l.id }

// streamID: a WebTransport stream is a lane without a stream_id.
func (w *wtConn) streamID() string { return "" }

// mux shares one WebSocket among a Branch's lanes: one goroutine reads
// every event and queues it for its lane; sends are serialized.
type mux struct {
	ws    *wsConn
	lanes []string
	byID  map[string]*muxLane
	done  chan struct{}

	sendMu sync.Mutex
}

// muxLane is one lane's queue of events, unbounded: a branch busy running
// tools must not stop the others' events.
type muxLane struct {
	m     *mux
	id    string
	mu    sync.Mutex
	queue []muxEvent
	err   error // the connection's end, once read
	ready chan struct{}
}

type muxEvent struct {
	ev   protocol.Event
	cost frameCost
}

func newMux(ws *wsConn, n int) *mux {
	m := &mux{ws: ws, byID: make(map[string]*muxLane, n+1), done: make(chan struct{})}
	for i := range n {
		m.lanes = append(m.lanes, "b"+strconv.Itoa(i))
	}
	for _, id := range append([]string{rootLane}, m.lanes...) {
		m.byID[id] = &muxLane{m: m, id: id, ready: make(chan struct{}, 1)}
	}
	return m
}

func (m *mux) lane(i int) *muxLane { return m.byID[m.lanes[i]] }

// read hands each event to its lane until the connection or ctx ends, then
// gives every lane that end.
func (m *mux) read(ctx context.Context) {
	defer close(m.done)
	for {
		ev, cost, err := m.ws.next(ctx)
		if err != nil {
			for _, l := range m.byID {
				l.put(muxEvent{}, err)
			}
			return
		}
		l := m.byID[protocol.Header(ev).StreamID]
		if e, ok := ev.(*protocol.ErrorEvent); ok && l == nil {
			// An error that names no lane: every branch is told.
			for _, l := range m.byID {
				l.put(muxEvent{ev: e, cost: cost}, nil)
			}
			continue
		}
		if l != nil {
			l.put(muxEvent{ev: ev, cost: cost}, nil)
		}
	}
}

func (l *muxLane) put(e muxEvent, err error) {
	l.mu.Lock()
	if err != nil {
		l.err = err
	} else {
		l.queue = append(l.queue, e)
	}
	l.mu.Unlock()
	select {
	case l.ready <- struct{}{}:
	default:
	}
}

func (l *muxLane) next(ctx context.Context) (protocol.Event, frameCost, error) {
	for {
		l.mu.Lock()
		if len(l.queue) > 0 {
			e := l.queue[0]
			l.queue = l.queue[1:]
			l.mu.Unlock()
			return e.ev, e.cost, nil
		}
		err := l.err
		l.mu.Unlock()
		if err != nil {
			return nil, frameCost{}, err
		}
		select {
		case <-l.ready:
		case <-ctx.Done():
			return nil, frameCost{}, ctx.Err()
		}
	}
}

func (l *muxLane) send(ctx context.Context, ev any) (frameCost, error) {
	l.m.sendMu.Lock()
	defer l.m.sendMu.Unlock()
	return l.m.ws.send(ctx, ev)
}
