package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/hostedtools/mcp"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/webtransport"
	"github.com/tether-run/tether/sampler"
)

// runRollout runs "tether run": one agent rollout with the local tools, in
// one mode, against a server at --url or an in-process one, shown live.
func runRollout(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCommand("run", `Usage: tether run [flags] ["task"]

Runs one agent rollout with the local tools (list_dir, read_file, grep,
apply_patch, shell) acting on --workdir, and shows it live. Without --url it
starts a tether on loopback. The task defaults to the trace's for replay
models.`, `tether run
		tether run --mode turns --model tether-scripted "Look around.\ncall: list_dir {\"path\":\".\"}"
		tether run --url http://127.0.0.1:8080/v1 --mode suspend --branches 4`, -1)
	url := fs.String("url", "", "base URL of a Responses server, as OpenAI clients take it (http://HOST:PORT/v1); empty starts a tether in-process")
	model := fs.String("model", sampler.ReplayPrefix+"calc-fix-12", "model to run")
	modeName := fs.String("mode", "suspend", "design: suspend, inject (the multi-agent beta's dialect), turns, chained, background (chained, each turn's stream cut and resumed) or stateless")
	workdir := fs.String("workdir", "", "directory the tools act on (default: a new copy of the replay traces' fixture repository, removed when the run ends)")
	keep := fs.Bool("keep", false, "keep the copy of the fixture repository made when --workdir is empty, and print where it is")
	jsonOut := fs.Bool("json", false, "print every server event as a JSON line, then a summary line")
	eager := fs.Bool("eager", false, "start each client tool as soon as its call is done, before the step ends")
	encoding := fs.String("encoding", "json", "WebSocket or WebTransport frames (modes suspend and turns): json, or msgpack")
	transport := fs.String("transport", "websocket", "what carries modes suspend, inject and turns: websocket, or webtransport (then --url is the server's WebTransport base URL, https://HOST:PORT/v1, as tether serve --wt-addr prints it)")
	certHash := fs.String("cert-hash", "", "webtransport: the SHA-256 (hex) that pins the server's certificate, as tether serve prints it")
	apiKey := fs.String("api-key", "", "bearer token for --url (default: $OPENAI_API_KEY)")
	tps := fs.Float64("tps", 400, "in-process server: output tokens per second (0 is unpaced)")
	ttft := fs.Duration("ttft", 150*time.Millisecond, "in-process server: time to first token")
	prefillRate := fs.Float64("prefill-rate", 0, "in-process server: uncached prompt tokens read per second (0 is free)")
	mcpServers := fs.String("mcp", "", "offer hosted MCP servers as tools: LABEL=URL, comma-separated (the model calls LABEL.TOOL); each call asks the client's approval, which tether run gives")
	mcpDeny := fs.Bool("mcp-deny", false, "deny every MCP call the server asks to approve instead")
	agents := fs.Int("agents", 0, "run a multi-agent rollout (the Responses multi-agent beta): with the default model, a root that splits the replay trace's tool calls between this many sub-agents, whose calls run side by side, and waits for them (tether-scripted); with another, the task as given, up to this many sub-agents at once. Modes inject (the default with it), chained, background and stateless")
	branches := fs.Int("branches", 0, "modes suspend and turns: at the first pause, branch the rollout into this many (response.fork, or previous_response_id on other lanes), each running the paused calls and the rest in a copy of the workdir of its own (up to 64)")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if *apiKey == "" { // read here, not as the flag's default, which -h prints
		*apiKey = os.Getenv("OPENAI_API_KEY")
	}
	enc, err := protocol.ParseEncoding(*encoding)
	if err != nil {
		fmt.Fprintln(stderr, "tether: run: --encoding:", err)
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *agents > 0 && !set["mode"] {
		*modeName = "inject"
	}
	mode, err := clienttools.ParseMode(*modeName)
	if err != nil {
		fmt.Fprintln(stderr, "tether: run:", err)
		return 2
	}
	if *agents < 0 || *agents > 0 && (mode == clienttools.ModeSuspend || mode == clienttools.ModeTurns || *branches > 0) {
		fmt.Fprintf(stderr, "tether: run: --agents %d: want at least 1, with --mode inject, chained, background or stateless, and no --branches\n", *agents)
		return 2
	}
	var tp clienttools.Transport
	switch *transport {
	case "websocket":
	case "webtransport":
		tp = clienttools.TransportWebTransport
		if mode != clienttools.ModeSuspend && mode != clienttools.ModeInject && mode != clienttools.ModeTurns {
			fmt.Fprintf(stderr, "tether: run: --transport webtransport carries modes suspend, inject and turns, not %s\n", mode)
			return 2
		}
		if *certHash != "" {
			if _, err := clienttools.PinCertificate(*certHash); err != nil {
				fmt.Fprintln(stderr, "tether: run: --cert-hash:", err)
				return 2
			}
		}
	default:
		fmt.Fprintf(stderr, "tether: run: --transport %q: want websocket or webtransport\n", *transport)
		return 2
	}
	mcpTools, err := mcpToolFlag(*mcpServers)
	if err != nil {
		fmt.Fprintln(stderr, "tether: run: --mcp:", err)
		return 2
	}
	if *branches < 0 || *branches > clienttools.MaxBranches || *branches > 0 && mode != clienttools.ModeSuspend && mode != clienttools.ModeTurns {
		fmt.Fprintf(stderr, "tether: run: --branches %d: want 1 to %d, with --mode suspend or turns\n", *branches, clienttools.MaxBranches)
		return 2
	}
	task := strings.Join(fs.Args(), " ")
	if task == "" && *agents > 0 {
		if task = treeTask(*model, *agents); task != "" {
			*model = sampler.ScriptedModel
		}
	}
	if task == "" {
		if task = traceTask(*model); task == "" {
			fmt.Fprintf(stderr, "tether: run: give a task for model %s\n", *model)
			return 2
		}
	}
	shown := *workdir // the workdir the summary names: not a copy removed as the run ends
	if *workdir == "" {
		dir, err := os.MkdirTemp("", "tether-run-")
		if err == nil {
			err = os.CopyFS(dir, sampler.FixtureRepo())
		}
		if err != nil {
			fmt.Fprintln(stderr, "tether: run:", err)
			return 1
		}
		*workdir = dir
		if *keep {
			shown = dir
			defer fmt.Fprintln(stderr, "tether: run: kept the workdir", dir)
		} else {
			defer os.RemoveAll(dir)
		}
	}
	if err := baseURL("url", *url); err != nil {
		fmt.Fprintln(stderr, "tether: run:", err)
		return 2
	}
	base, hash := *url, *certHash
	if base == "" {
		local, err := startLocal(timingFlags{timing: sampler.Timing{TPS: *tps, TTFT: *ttft, PrefillRate: *prefillRate}}, tp == clienttools.TransportWebTransport)
		if err != nil {
			fmt.Fprintln(stderr, "tether: run:", err)
			return 1
		}
		defer local.stop()
		base = "http://" + local.addr + "/v1"
		if tp == clienttools.TransportWebTransport {
			base, hash = local.wtBase, local.wtHash
		}
	}

	v := newView(stdout, *jsonOut)
	defer v.close()
	v.header(fmt.Sprintf("%s rollout of %s at %s, tools in %s", mode, *model, base, *workdir))
	tools := &clienttools.Tools{Dir: *workdir}
	c := &clienttools.Client{BaseURL: base, APIKey: *apiKey, Eager: *eager, Encoding: enc, Transport: tp, CertHash: hash}
	ro := clienttools.Rollout{
		Mode: mode,
		Request: &protocol.CreateRequest{Model: *model, Include: []string{protocol.IncludeTimings},
			Input: protocol.Items{protocol.UserMessage(task)}, Tools: mcpTools},
		Funcs:   tools.Funcs(),
		OnEvent: v.event,
		OnCall:  v.call,
		Approve: func(context.Context, clienttools.Call) bool { return !*mcpDeny },
	}
	if n := *agents; n > 0 {
		ro.Request.MultiAgent = &protocol.MultiAgent{Enabled: new(true), MaxConcurrentSubagents: &n}
	}
	if *branches > 0 {
		return runBranches(ctx, c, ro, *branches, *model, *workdir, v, stderr)
	}
	res, err := c.Run(ctx, ro)
	err = hint(err, c)
	v.summary(mode, *model, shown, res, err)
	if err != nil {
		return 1
	}
	return 0
}

// runBranches runs ro to its first pause and branches it there, each
// branch in a copy of workdir of its own, and sums each branch up. The
// prefix shows as an unbranched rollout does; each branch's lines start
// with its label, b0, b1, ….
func runBranches(ctx context.Context, c *clienttools.Client, ro clienttools.Rollout, n int, model, workdir string, v *view, stderr io.Writer) int {
	bs := make([]clienttools.Branch, n)
	dirs := make([]string, n)
	views := make([]*view, n)
	for i := range bs {
		// A new directory each, outside the workdir (which may hold
		// earlier runs' copies).
		dir, err := os.MkdirTemp("", fmt.Sprintf("%s-b%d-", filepath.Base(filepath.Clean(workdir)), i))
		if err == nil {
			err = os.CopyFS(dir, os.DirFS(workdir))
		}
		if err != nil {
			fmt.Fprintln(stderr, "tether: run: --branches:", err)
			return 1
		}
		dirs[i] = dir
		views[i] = v.branch(fmt.Sprintf("b%d", i))
		bs[i] = clienttools.Branch{Funcs: (&clienttools.Tools{Dir: dirs[i]}).Funcs(), OnEvent: views[i].event, OnCall: views[i].call}
	}
	results, err := c.Branch(ctx, ro, bs)
	err = hint(err, c)
	if len(results) == 0 {
		v.summary(ro.Mode, model, workdir, &clienttools.Result{}, err)
		return 1
	}
	for i, res := range results {
		if res != nil {
			views[i].summary(ro.Mode, model, dirs[i], res, nil)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "tether: run:", err)
		return 1
	}
	return 0
}

// hint is err, saying which flag fixes it when one does.
func hint(err error, c *clienttools.Client) error {
	return certHashHint(apiKeyHint(err), c)
}

// baseURL checks that a --url is a base URL, as OpenAI clients take it
// (http://HOST:PORT/v1), not the responses endpoint under it, which a
// client would make …/v1/responses/responses of.
func baseURL(flag, url string) error {
	if trimmed := strings.TrimRight(url, "/"); strings.HasSuffix(trimmed, "/responses") {
		return fmt.Errorf("--%s %s: give the base URL, %s, not the responses endpoint under it", flag, url, strings.TrimSuffix(trimmed, "/responses"))
	}
	return nil
}

// certHashHint is err, saying how to pin the server's certificate when a
// WebTransport dial failed to verify it: tether serve's certificate is
// self-signed, and no root vouches for it.
func certHashHint(err error, c *clienttools.Client) error {
	if c.Transport == clienttools.TransportWebTransport && errors.As(err, new(*tls.CertificateVerificationError)) {
		return fmt.Errorf("%w (pass --cert-hash HEX, as tether serve prints it on its `%s` line)", err, webTransportLine("https://…", "HEX"))
	}
	return err
}

// apiKeyHint is err, saying how to give a key when the server refused the
// one sent (or its absence).
func apiKeyHint(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) && (pe.Status == http.StatusUnauthorized || pe.Code == protocol.CodeInvalidAPIKey) {
		return fmt.Errorf("%w (pass --api-key KEY, or set OPENAI_API_KEY)", err)
	}
	return err
}

// mcpToolFlag is the mcp tools of --mcp: LABEL=URL, comma-separated.
func mcpToolFlag(s string) ([]protocol.Tool, error) {
	var tools []protocol.Tool
	for _, def := range splitList(s) {
		label, url, ok := strings.Cut(def, "=")
		if !ok || label == "" || url == "" {
			return nil, fmt.Errorf("%q: want LABEL=URL, such as docs=http://127.0.0.1:8000/mcp", def)
		}
		raw, _ := json.Marshal(map[string]string{"type": "mcp", "server_label": label, "server_url": url, "require_approval": "always"})
		var t protocol.Tool
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// traceTask is the recorded task of a replay model, or "".
func traceTask(model string) string {
	if tr := traceOf(model); tr != nil {
		return tr.Task
	}
	return ""
}

// traceOf is the trace a replay model replays, nil for another model.
func traceOf(model string) *sampler.Trace {
	name, ok := strings.CutPrefix(model, sampler.ReplayPrefix)
	if !ok {
		return nil
	}
	traces, err := sampler.LoadTraces()
	if err != nil {
		return nil
	}
	i := slices.IndexFunc(traces, func(t *sampler.Trace) bool { return t.Name == name })
	if i < 0 {
		return nil
	}
	return traces[i]
}

// treeTask is a task for the scripted model that splits the tool calls
// of replay model's trace between n sub-agents, each making its share one
// after the other, and waits for them; "" when model is not a replay.
func treeTask(model string, n int) string {
	tr := traceOf(model)
	if tr == nil {
		return ""
	}
	shares := make([]strings.Builder, n)
	k := 0
	for _, step := range tr.Steps {
		for _, c := range step.Calls {
			fmt.Fprintf(&shares[k%n], "call: %s %s\n", c.Name, c.Arguments)
			k++
		}
	}
	var task strings.Builder
	fmt.Fprintf(&task, "%s\nSplit the work between %d sub-agents, then report what they found.\nspawn: ", tr.Task, n)
	var names []string
	for j := range shares {
		name := fmt.Sprintf("helper_%d", j+1)
		spec, _ := json.Marshal(map[string]string{"message": shares[j].String()})
		if j > 0 {
			task.WriteString(" | ")
		}
		fmt.Fprintf(&task, "%s %s", name, spec)
		names = append(names, name)
	}
	task.WriteString("\nwait: " + strings.Join(names, ", ") + "\n")
	return task.String()
}

// startLocal serves tether on a loopback port, every model paced by flags,
// and returns how to stop it and its address.
// localServer is a tether started in-process on loopback for tether run.
type localServer struct {
	addr           string // HOST:PORT of its HTTP and WebSocket listener
	wtBase, wtHash string // its WebTransport endpoint, when asked for
	stop           func()
}

func startLocal(flags timingFlags, webTransport bool) (*localServer, error) {
	r, err := sampler.NewRenderer()
	if err != nil {
		return nil, err
	}
	flags.set = map[string]bool{"tps": true, "ttft": true, "prefill-rate": true}
	served, err := models(nil, flags, r, sampler.NewEngine())
	if err != nil {
		return nil, err
	}
	srv, err := runtime.NewServer(runtime.Options{Models: served, Renderer: r,
		MCP: mcp.NewClient(mcp.Options{})})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var wt *webtransport.Endpoint
	if webTransport {
		cert, err := webtransport.SelfSignedCertificate(24*time.Hour, "127.0.0.1")
		if err == nil {
			wt, err = webtransport.Listen(srv, "127.0.0.1:0", cert)
		}
		if err != nil {
			ln.Close()
			return nil, err
		}
	}
	hs := &http.Server{Handler: srv}
	serving := make(chan struct{})
	go func() { defer close(serving); hs.Serve(ln) }()
	l := &localServer{addr: ln.Addr().String(), stop: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		hs.Shutdown(ctx)
		if wt != nil {
			wt.Close()
		}
		<-serving
	}}
	if wt != nil {
		l.wtBase, l.wtHash = wt.URL(), wt.CertificateHash()
	}
	return l, nil
}
