package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
)

// view shows a rollout as it runs. On a terminal it streams the model's
// text, draws a spinner while the model or a tool works, and prints each
// tool call on one line; elsewhere it prints plain lines (no control codes);
// with --json, every event as a JSON line. A branch's view (branch) shares
// its rollout's screen and starts each of its lines with its label; its
// text is not streamed but printed a message a line, so that the branches'
// lines, which interleave, each say whose they are. The methods may be
// called from any goroutine, one at a time; the spinner draws from its
// own, under the screen's mu.
type view struct {
	*screen
	label string // a branch's ("b0"), the start of each of its lines; "" for the rollout's own
	// engine is each response's engine timings as last printed
	// (engineStep).
	engine map[string]protocol.EngineTimings
}

// screen is where a rollout's views print, and what is drawn there.
type screen struct {
	w    io.Writer
	tty  bool
	json bool

	mu       sync.Mutex
	status   string // what the spinner says; "" hides it. guarded by mu
	spinning bool   // the spinner's line is drawn; guarded by mu
	midLine  bool   // streamed text left the cursor mid-line; guarded by mu
	stop     chan struct{}
	done     chan struct{}
}

func newView(w io.Writer, jsonOut bool) *view {
	s := &screen{w: w, json: jsonOut, tty: !jsonOut && isTerminal(w), status: "waiting for the model"}
	if s.tty {
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go s.spin()
	}
	return &view{screen: s}
}

// branch is the view of the branch labelled label, on v's screen.
func (v *view) branch(label string) *view { return &view{screen: v.screen, label: label} }

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

var spinnerFrames = []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")

// spin redraws the spinner line ten times a second.
func (s *screen) spin() {
	defer close(s.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		if s.status != "" && !s.midLine {
			fmt.Fprintf(s.w, "\r\x1b[2K\x1b[2m%c %s…\x1b[0m", spinnerFrames[i%len(spinnerFrames)], s.status)
			s.spinning = true
		}
		s.mu.Unlock()
	}
}

func (s *screen) close() {
	if s.stop != nil {
		close(s.stop)
		<-s.done
		s.mu.Lock()
		s.clearLocked()
		s.mu.Unlock()
	}
}

// clearLocked erases the spinner's line before something is printed.
func (s *screen) clearLocked() {
	if s.spinning {
		fmt.Fprint(s.w, "\r\x1b[2K")
		s.spinning = false
	}
}

// printf prints a line of its own (lines, if the text has several), each
// starting with the view's label, but for --json's (JSON lines whose
// objects say whose they are).
func (v *view) printf(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	if v.label != "" && !v.json {
		text = v.label + " " + strings.ReplaceAll(text, "\n", "\n"+v.label+" ")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clearLocked()
	if v.midLine {
		fmt.Fprintln(v.w)
		v.midLine = false
	}
	fmt.Fprintln(v.w, text)
}

func (s *screen) setStatus(status string) {
	s.mu.Lock()
	s.status = status
	s.mu.Unlock()
}

func (v *view) header(s string) {
	if v.json {
		return
	}
	if v.tty {
		v.printf("\x1b[1m%s\x1b[0m", s)
		return
	}
	v.printf("%s", s)
}

// event shows one server event.
func (v *view) event(ev protocol.Event) {
	if v.json {
		v.printf("%s", v.eventJSON(ev))
		return
	}
	switch ev := ev.(type) {
	case *protocol.TextDeltaEvent:
		if v.tty && v.label == "" && ev.Type == protocol.EventOutputTextDelta {
			v.mu.Lock()
			v.clearLocked()
			fmt.Fprint(v.w, ev.Delta)
			v.midLine = true
			v.mu.Unlock()
		}
	case *protocol.OutputItemEvent:
		if ev.Type != protocol.EventOutputItemDone {
			return
		}
		switch it := ev.Item.(type) {
		case *protocol.Message:
			if !v.tty || v.label != "" {
				who := "assistant"
				if it.Agent != nil { // a sub-agent's
					who = it.Agent.AgentName
				}
				v.printf("%s: %s", who, messageText(it))
			} else {
				v.printf("")
			}
		case *protocol.WebSearchCall:
			v.printf("  web_search %s", it.Status)
		case *protocol.MCPListTools:
			if it.Error != nil {
				v.printf("  mcp %s: listing its tools failed: %s", it.ServerLabel, oneLine(*it.Error, 72))
			} else {
				v.printf("  mcp %s: %d tools", it.ServerLabel, len(it.Tools))
			}
		case *protocol.MCPCall:
			result := ""
			switch {
			case it.Output != nil:
				result = oneLine(*it.Output, 60)
			case it.Error != nil:
				result = "error: " + oneLine(string(it.Error), 60)
			}
			v.printf("  mcp %s.%s %s → %s", it.ServerLabel, it.Name, oneLine(it.Arguments, 60), result)
		}
	case *protocol.ResponseEvent:
		v.engineStep(ev.Response)
		switch ev.Type {
		case protocol.EventDone:
			v.setStatus("running tools")
		case protocol.EventCompleted:
			if len(openCalls(ev.Response)) > 0 {
				v.setStatus("running tools")
			}
		}
	}
}

// engineStep prints what a simulated inference engine did with the model
// steps of resp since its last pause (tether serve --engine-model), when
// its timings say.
func (v *view) engineStep(resp *protocol.Response) {
	if resp == nil || resp.Timings == nil || resp.Timings.Engine == nil {
		return
	}
	now := *resp.Timings.Engine
	if v.engine == nil {
		v.engine = make(map[string]protocol.EngineTimings)
	}
	was := v.engine[resp.ID]
	v.engine[resp.ID] = now
	if now == was {
		return
	}
	v.printf("  engine: first token %s after %s queued; %d prompt tokens prefilled, %d found in the cache, %d swapped in (%s)",
		duration(time.Duration(now.FirstTokenMicros-was.FirstTokenMicros)*time.Microsecond),
		duration(time.Duration(now.QueueMicros-was.QueueMicros)*time.Microsecond),
		now.PrefilledTokens-was.PrefilledTokens, now.HitTokens-was.HitTokens, now.SwappedTokens-was.SwappedTokens, now.Simulated)
}

// eventJSON is ev as a JSON line. A branch's event names the branch's
// lane, as it does on a WebSocket, where the lane is the label: on
// WebTransport, where a stream is a lane, the server names none.
func (v *view) eventJSON(ev protocol.Event) []byte {
	h := protocol.Header(ev)
	if h.StreamID != "" || v.label == "" {
		b, _ := json.Marshal(ev)
		return b
	}
	h.StreamID = v.label
	defer func() { h.StreamID = "" }()
	b, _ := json.Marshal(ev)
	return b
}

// openCalls counts the function calls a finished turn leaves to the client.
func openCalls(resp *protocol.Response) []*protocol.FunctionCall {
	var calls []*protocol.FunctionCall
	for _, it := range resp.Output {
		if fc, ok := it.(*protocol.FunctionCall); ok {
			calls = append(calls, fc)
		}
	}
	return calls
}

func messageText(m *protocol.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		if t, ok := c.(*protocol.OutputText); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// call shows a client call that has run.
func (v *view) call(c clienttools.Call) {
	v.setStatus("waiting for the model")
	if v.json {
		return
	}
	args := oneLine(c.Arguments, 72)
	if c.Type == protocol.ItemMCPApprovalRequest {
		answer := "denied"
		if c.Approved {
			answer = "approved"
		}
		v.printf("  %s mcp %s.%s %s", answer, c.Namespace, c.Name, args)
		return
	}
	result := fmt.Sprintf("%s, %s", duration(c.Duration), size(len(c.Output)))
	if c.Err != nil {
		result = "error: " + oneLine(c.Err.Error(), 60)
	}
	by := ""
	if c.Agent != "" { // a sub-agent's
		by = c.Agent + " "
	}
	if v.tty {
		v.printf("  %s\x1b[36m▸ %s\x1b[0m %s \x1b[2m(%s)\x1b[0m", by, c.Name, args, result)
		return
	}
	v.printf("%scall %s %s (%s)", by, c.Name, args, result)
}

// oneLine cuts s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// duration rounds d for a reader: to the millisecond, or the microsecond
// below one.
func duration(d time.Duration) string {
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func size(n int) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f kB", float64(n)/1000)
}

// summary ends the view: turns, calls, tokens, where the time went, and
// the workdir unless it is "" (a copy removed as the run ends); after an
// error before any turn, the error alone.
func (v *view) summary(mode clienttools.Mode, model, workdir string, res *clienttools.Result, err error) {
	v.setStatus("")
	b := res.Breakdown()
	status := "failed"
	if res.Response != nil {
		status = string(res.Response.Status)
	}
	if v.json {
		sum := map[string]any{
			"type": "tether.summary", "mode": mode.String(), "model": model, "status": status, "error": errString(err),
			"turns": len(res.Turns), "tool_calls": len(res.Calls), "usage": res.Usage, "elapsed_ms": res.Elapsed.Milliseconds(),
			"model_ms": b.Model.Milliseconds(), "tools_ms": b.Tools.Milliseconds(), "overhead_ms": b.Overhead.Milliseconds(),
			"reconnects": res.Reconnects, "workdir": workdir,
		}
		if v.label != "" {
			sum["branch"] = v.label
		}
		b, _ := json.Marshal(sum)
		v.printf("%s", b)
		return
	}
	if err != nil {
		v.printf("error: %v", err)
		if len(res.Turns) == 0 { // nothing ran: no figures to sum up
			if workdir != "" {
				v.printf("workdir: %s", workdir)
			}
			return
		}
	}
	if v.label != "" {
		v.printf("answer: %s", oneLine(res.Text(), 100))
	}
	v.printf("%s in %s (%s, %s): %d turns, %d tool calls", status, res.Elapsed.Round(time.Millisecond), mode, model, len(res.Turns), len(res.Calls))
	v.printf("tokens: %d in (%d cached), %d out", res.Usage.InputTokens, res.Usage.InputTokensDetails.CachedTokens, res.Usage.OutputTokens)
	if b.Model > 0 {
		v.printf("time: model %s, tools %s, API overhead %s", b.Model.Round(time.Millisecond), b.Tools.Round(time.Millisecond), b.Overhead.Round(time.Millisecond))
	} else {
		v.printf("time: tools %s, model and API %s (the server reports no timings)", b.Tools.Round(time.Millisecond), b.Overhead.Round(time.Millisecond))
	}
	if workdir != "" { // not a copy removed as the run ends
		v.printf("workdir: %s", workdir)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
