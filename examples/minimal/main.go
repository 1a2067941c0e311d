// Minimal runs one suspended rollout against tether with one local tool.
//
// The whole rollout is one response: the server pauses it when the model
// calls word_count (response.done, status requires_action), the client kit
// runs the calls here and answers with response.append, and the same
// response goes on until the model answers. The scripted model makes the
// calls of each "call: NAME {json}" line of the user message in a step of
// its own, and calls joined by " | " in one step: here, one call per
// sentence, which the kit runs concurrently and answers with one append.
// The scripted model's answer repeats the outputs it was given last: both
// counts.
//
// Run a server in one shell and the example in another:
//
//	go run ./cmd/tether serve --addr 127.0.0.1:8080 --tps 300
//	go run ./examples/minimal
//
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
	"strconv"
	"strings"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
)

// wordCount is a client tool: the model sends JSON arguments, Run returns
// the output the model reads. An error is sent to the model as the output.
var wordCount = clienttools.Func{
	Name:        "word_count",
	Description: "Count the words of a text.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	Run: func(ctx context.Context, arguments string) (string, error) {
		var args struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(arguments), &args); err != nil {
			return "", fmt.Errorf("bad arguments: %w", err)
		}
		return strconv.Itoa(len(strings.Fields(args.Text))), nil
	},
}

const task = `How many words are in each of these two sentences?
call: word_count {"text":"The quick brown fox jumps over the lazy dog"} | word_count {"text":"Suspended rollouts pause on client tools"}`

func main() {
	url := flag.String("url", defaultURL(), "base URL of the server, as OpenAI clients take it")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	c := &clienttools.Client{BaseURL: *url}
	res, err := c.Run(ctx, clienttools.Rollout{
		Mode: clienttools.ModeSuspend,
		Request: &protocol.CreateRequest{
			Model: "tether-scripted",
			Input: protocol.Items{protocol.UserMessage(task)},
		},
		Funcs: []clienttools.Func{wordCount},
		OnCall: func(call clienttools.Call) {
			fmt.Printf("call  %s %s -> %q (%v)\n", call.Name, call.Arguments, call.Output, call.Duration.Round(time.Microsecond))
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "minimal:", err)
		os.Exit(1)
	}
	fmt.Printf("answer %q\n", res.Text())
	fmt.Printf("response %s %s: %d turns, %d calls, %d+%d tokens, %v\n", res.Response.ID, res.Response.Status,
		len(res.Turns), len(res.Calls), res.Usage.InputTokens, res.Usage.OutputTokens, res.Elapsed.Round(time.Millisecond))
	for i, t := range res.Turns {
		fmt.Printf("turn %d: first event %v, stream %v, tools %v, %d calls, %d B sent, %d B received\n", i,
			t.FirstEvent.Round(time.Microsecond), t.Stream.Round(time.Microsecond), t.Tools.Round(time.Microsecond),
			t.Calls, t.BytesSent, t.BytesReceived)
	}
}

func defaultURL() string {
	if u := os.Getenv("TETHER_URL"); u != "" {
		return u
	}
	return "http://127.0.0.1:8080/v1"
}
