// Websearch runs one suspended rollout in which the model uses tether's
// hosted web_search and a client tool: first a step that calls both at
// once, then a search alone, whose results the answer cites.
//
// A hosted tool runs inside the server's sampling loop and never pauses
// the rollout: the client only sees its events
// (response.web_search_call.in_progress, .searching, .completed) and its
// web_search_call item. A client tool pauses it (response.done,
// requires_action) until the client appends the output; in the first
// step the server runs the search alongside the client's save_note.
//
// Run a server in one shell and the example in another:
//
//	go run ./cmd/tether serve --addr 127.0.0.1:8080 --tps 300
//	go run ./examples/websearch
//
// tether serve searches an index of the Go standard library documentation
// embedded in the binary, built on the first search (--search-corpus DIR
// indexes your own documents).
// -url (default $TETHER_URL, else http://127.0.0.1:8080/v1) points it at
// another server.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
)

const task = `Find out how to stop an HTTP server gracefully, and keep a note of it.
call: web_search {"query":"http server graceful shutdown"} | save_note {"text":"look up Server.Shutdown"}
call: web_search {"query":"Server Shutdown context deadline"}`

func main() {
	url := flag.String("url", defaultURL(), "base URL of the server, as OpenAI clients take it")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var mu sync.Mutex
	var notes []string
	saveNote := clienttools.Func{
		Name:        "save_note",
		Description: "Save a note for later.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Run: func(ctx context.Context, arguments string) (string, error) {
			var args struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal([]byte(arguments), &args); err != nil || args.Text == "" {
				return "", fmt.Errorf("want {\"text\": \"...\"}, got %s", arguments)
			}
			mu.Lock()
			defer mu.Unlock()
			notes = append(notes, args.Text)
			return fmt.Sprintf("saved note %d", len(notes)), nil
		},
	}

	start := time.Now()
	c := &clienttools.Client{BaseURL: *url}
	res, err := c.Run(ctx, clienttools.Rollout{
		Mode: clienttools.ModeSuspend,
		Request: &protocol.CreateRequest{
			Model: "tether-scripted",
			Input: protocol.Items{protocol.UserMessage(task)},
			Tools: []protocol.Tool{{Type: protocol.ToolWebSearch}}, // the client kit adds save_note
		},
		Funcs: []clienttools.Func{saveNote},
		OnEvent: func(ev protocol.Event) {
			at := time.Since(start).Round(time.Microsecond)
			switch ev := ev.(type) {
			case *protocol.WebSearchCallEvent:
				fmt.Printf("%9v  %s %s\n", at, ev.Type, ev.ItemID)
			case *protocol.OutputItemEvent:
				if ws, ok := ev.Item.(*protocol.WebSearchCall); ok && ev.Type == protocol.EventOutputItemDone && ws.Action != nil {
					fmt.Printf("%9v  web_search %q: %d sources\n", at, ws.Action.Query, len(ws.Action.Sources))
					for _, s := range ws.Action.Sources {
						fmt.Printf("             %s  %s\n", s.URL, s.Title)
					}
				}
			case *protocol.ResponseEvent:
				if ev.Type == protocol.EventDone {
					fmt.Printf("%9v  response.done: paused for %d client call(s)\n", at, len(ev.Response.RequiredAction.SubmitToolOutputs.ToolCalls))
				}
			}
		},
		OnCall: func(call clienttools.Call) {
			fmt.Printf("%9v  client call %s %s -> %q\n", time.Since(start).Round(time.Microsecond), call.Name, call.Arguments, call.Output)
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "websearch:", err)
		os.Exit(1)
	}
	fmt.Printf("answer %q\n", finalText(res.Output))
	fmt.Printf("response %s %s: %d turns, %d client calls, notes %q, %v\n", res.Response.ID, res.Response.Status,
		len(res.Turns), len(res.Calls), notes, res.Elapsed.Round(time.Millisecond))
}

// finalText is the text of the rollout's last message, with its citations.
func finalText(output protocol.Items) string {
	for i := len(output) - 1; i >= 0; i-- {
		if m, ok := output[i].(*protocol.Message); ok {
			var b strings.Builder
			for _, c := range m.Content {
				if t, ok := c.(*protocol.OutputText); ok {
					b.WriteString(t.Text)
					for _, a := range t.Annotations {
						fmt.Fprintf(&b, " [%s %s]", a.Type, a.URL)
					}
				}
			}
			return b.String()
		}
	}
	return ""
}

func defaultURL() string {
	if u := os.Getenv("TETHER_URL"); u != "" {
		return u
	}
	return "http://127.0.0.1:8080/v1"
}
