// Fork runs a best-of-4 search over one tool call of a suspended rollout:
// the rollout parks on its call, response.fork clones it onto four lanes
// of the same WebSocket, each fork gets a different output for the call
// and goes on to its own answer, and the best answer wins. The shared
// prefix (the context, rendered once) is neither sent nor tokenized again.
//
// Run a server in one shell and the example in another:
//
//	go run ./cmd/tether serve --addr 127.0.0.1:8080 --tps 300
//	go run ./examples/fork
//
// -url (default $TETHER_URL, else http://127.0.0.1:8080/v1) points it at
// another server. It speaks the raw events, to show them: see
// "Fork" in docs/protocol.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// candidates are what the tool "returns" in each branch: a search would
// try the model's call against different environments, seeds or tools.
var candidates = []string{
	"timeout = 30s (the default)",
	"timeout = 5s, retries = 3",
	"timeout = 120s",
	"timeout = 10s, retries = 5, backoff = exponential",
}

const task = `Which timeout settings should the client use?
call: read_config {"path":"client.toml"}`

// event is what this client reads of a server event.
type event struct {
	Type     string `json:"type"`
	StreamID string `json:"stream_id"`
	Delta    string `json:"delta"`
	Response *struct {
		ID             string `json:"id"`
		Status         string `json:"status"`
		ForkedFrom     string `json:"forked_from"`
		RequiredAction *struct {
			SubmitToolOutputs struct {
				ToolCalls []struct {
					CallID string `json:"call_id"`
				} `json:"tool_calls"`
			} `json:"submit_tool_outputs"`
		} `json:"required_action"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func main() {
	url := flag.String("url", defaultURL(), "base URL of the server, as OpenAI clients take it")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := run(ctx, *url); err != nil {
		fmt.Fprintln(os.Stderr, "fork:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, base string) error {
	ws, ok := strings.CutPrefix(base, "http")
	if !ok {
		return fmt.Errorf("-url %q: want http://HOST:PORT/v1", base)
	}
	c, _, err := websocket.Dial(ctx, "ws"+ws+"/responses", nil)
	if err != nil {
		return err
	}
	defer c.CloseNow()
	send := func(v any) error {
		b, _ := json.Marshal(v)
		return c.Write(ctx, websocket.MessageText, b)
	}
	next := func() (*event, error) {
		_, b, err := c.Read(ctx)
		if err != nil {
			return nil, err
		}
		var e event
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, err
		}
		if e.Type == "error" {
			return nil, fmt.Errorf("%s: %s", e.Error.Code, e.Error.Message)
		}
		return &e, nil
	}

	// One suspended rollout on lane "root", parked on its call.
	err = send(map[string]any{"type": "response.create", "stream_id": "root", "model": "tether-scripted", "store": false, "suspend": true,
		"tools": []any{map[string]any{"type": "function", "name": "read_config", "description": "Read a config file.",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}},
		"input": task})
	if err != nil {
		return err
	}
	var root, callID string
	for callID == "" {
		e, err := next()
		if err != nil {
			return err
		}
		if e.Type == "response.done" {
			root, callID = e.Response.ID, e.Response.RequiredAction.SubmitToolOutputs.ToolCalls[0].CallID
		}
	}
	fmt.Printf("rollout %s parked on %s\n", root, callID)

	// Four forks, one per lane, each parked on the same call.
	lanes := []string{"b0", "b1", "b2", "b3"}
	start := time.Now()
	if err := send(map[string]any{"type": "response.fork", "stream_id": "root", "response_id": root, "stream_ids": lanes}); err != nil {
		return err
	}
	forks, answers := map[string]string{}, map[string]string{}
	text := map[string]*strings.Builder{}
	for len(answers) < len(lanes) {
		e, err := next()
		if err != nil {
			return err
		}
		lane := e.StreamID
		switch e.Type {
		case "response.created":
			forks[lane], text[lane] = e.Response.ID, &strings.Builder{}
			if e.Response.ForkedFrom != root {
				return fmt.Errorf("fork on %s forked from %q, not %s", lane, e.Response.ForkedFrom, root)
			}
		case "response.done": // the fork's own pause: answer it with this branch's output
			i := strings.IndexByte("0123", lane[1])
			fmt.Printf("fork %s on %s parked on the same call, %v after the fork\n", forks[lane], lane, time.Since(start).Round(time.Microsecond))
			if err := send(map[string]any{"type": "response.append", "stream_id": lane, "response_id": forks[lane],
				"input": []any{map[string]any{"type": "function_call_output", "call_id": callID, "output": candidates[i]}}}); err != nil {
				return err
			}
		case "response.output_text.delta":
			text[lane].WriteString(e.Delta)
		case "response.completed":
			answers[lane] = text[lane].String()
			fmt.Printf("fork on %s answered: %s\n", lane, answers[lane])
		case "response.failed", "response.cancelled", "response.incomplete":
			return fmt.Errorf("fork on %s ended %s", lane, e.Response.Status)
		}
	}

	// The best branch: here, the answer with the most settings in it.
	best := ""
	for _, lane := range lanes {
		if best == "" || strings.Count(answers[lane], "=") > strings.Count(answers[best], "=") {
			best = lane
		}
	}
	fmt.Printf("best: %s (%s)\n", best, forks[best])

	// The original is still parked: nobody needs it now.
	if err := send(map[string]any{"type": "response.cancel", "stream_id": "root", "response_id": root}); err != nil {
		return err
	}
	for {
		e, err := next()
		if err != nil {
			return err
		}
		if e.Type == "response.cancelled" {
			fmt.Printf("rollout %s cancelled\n", root)
			return c.Close(websocket.StatusNormalClosure, "")
		}
		if e.Type == "response.completed" {
			return errors.New("the original completed, though nobody answered it")
		}
	}
}

func defaultURL() string {
	if u := os.Getenv("TETHER_URL"); u != "" {
		return u
	}
	return "http://127.0.0.1:8080/v1"
}
