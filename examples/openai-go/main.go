// Openai-go drives tether with OpenAI's official Go SDK
// (github.com/openai/openai-go/v3) over one WebSocket
// (client.Responses.Connect):
//
//  1. two cached-state turns, the shipped WebSocket mode: the model calls a
//     function tool, and the next response.create sends only the tool's
//     output with previous_response_id (the server's connection cache holds
//     the rest);
//  2. a suspended rollout (tether's extension) on the same connection. The
//     SDK has no type for it, but its escape hatches are enough:
//     SetExtraFields adds "suspend": true to the typed response.create,
//     RecvRaw reads events the SDK does not model (response.done with
//     status requires_action), and SendRaw sends response.append.
//
// Run a server in one shell and the example in another:
//
//	go run ./cmd/tether serve --addr 127.0.0.1:8080 --tps 300
//	go run ./examples/openai-go
//
// -url (default $TETHER_URL, else http://127.0.0.1:8080/v1) points it at
// another server.
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

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

const model = "tether-scripted"

// weather is the client side of the get_weather tool.
func weather(arguments string) string {
	var args struct {
		Location string `json:"location"`
	}
	if err := json.Unmarshal([]byte(arguments), &args); err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("Sunny, 21°C in %s", args.Location)
}

var weatherTool = responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
	Name:        "get_weather",
	Description: param.NewOpt("Get the current weather for a location."),
	Parameters: map[string]any{"type": "object", "required": []string{"location"},
		"properties": map[string]any{"location": map[string]any{"type": "string"}}},
	Strict: param.NewOpt(false),
}}

func main() {
	url := flag.String("url", defaultURL(), "base URL of the server, as OpenAI clients take it")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *url); err != nil {
		var pe *responses.ResponseProtocolError
		if errors.As(err, &pe) {
			err = fmt.Errorf("%w: %s", err, pe.Event.RawJSON()) // its Error() omits the event
		}
		fmt.Fprintln(os.Stderr, "openai-go:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url string) error {
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return fmt.Errorf("-url %q: want http://HOST:PORT/v1", url)
	}
	// The SDK joins paths to a base URL that ends in a slash.
	client := openai.NewClient(option.WithBaseURL(strings.TrimSuffix(url, "/")+"/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	conn, err := client.Responses.Connect(ctx, responses.ResponseConnectionOptions{})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()

	// Cached-state turns: the model calls get_weather, then reads its output.
	// The scripted model makes one call per "call: NAME {json}" line.
	start := time.Now()
	err = conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: model, Store: param.NewOpt(false), Tools: []responses.ToolUnionParam{weatherTool},
		Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfString: param.NewOpt(
			"What's the weather like in Paris?\ncall: get_weather {\"location\":\"Paris\"}")},
	})
	if err != nil {
		return err
	}
	first, err := conn.FinalResponse(ctx)
	if err != nil {
		return err
	}
	var outputs responses.ResponseInputParam
	for _, it := range first.Output {
		if it.Type == "function_call" {
			call := it.AsFunctionCall()
			out := weather(call.Arguments)
			fmt.Printf("turn 1 %s: %s %s -> %q (%v)\n", first.ID, call.Name, call.Arguments, out, time.Since(start).Round(time.Microsecond))
			outputs = append(outputs, responses.ResponseInputItemParamOfFunctionCallOutput(out))
			outputs[len(outputs)-1].OfFunctionCallOutput.CallID = param.NewOpt(call.CallID)
		}
	}
	if len(outputs) == 0 {
		return fmt.Errorf("turn 1 called no tool: %s", first.RawJSON())
	}
	start = time.Now()
	err = conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: model, Store: param.NewOpt(false), Tools: []responses.ToolUnionParam{weatherTool},
		PreviousResponseID: param.NewOpt(first.ID),
		Input:              responses.ResponsesClientEventResponseCreateInputUnionParam{OfResponse: &outputs},
	})
	if err != nil {
		return err
	}
	second, err := conn.FinalResponse(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("turn 2 %s (previous %s): %q, %d input tokens (%d cached) (%v)\n", second.ID, second.PreviousResponseID,
		second.OutputText(), second.Usage.InputTokens, second.Usage.InputTokensDetails.CachedTokens, time.Since(start).Round(time.Microsecond))

	return suspended(ctx, conn, second.ID)
}

// event is the part of a raw server event the suspended rollout reads.
type event struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	Response       *struct {
		ID             string `json:"id"`
		Status         string `json:"status"`
		RequiredAction *struct {
			SubmitToolOutputs struct {
				ToolCalls []struct {
					CallID    string `json:"call_id"`
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"tool_calls"`
			} `json:"submit_tool_outputs"`
		} `json:"required_action"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// suspended runs one suspended rollout that continues the conversation
// after previous: the scripted model calls get_weather twice, one step
// each, and the response pauses on each call until its output is appended.
func suspended(ctx context.Context, conn *responses.ResponseConnection, previous string) error {
	create := responses.ResponsesClientEventResponseCreateParam{
		Model: model, Store: param.NewOpt(false), Tools: []responses.ToolUnionParam{weatherTool},
		PreviousResponseID: param.NewOpt(previous),
		Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfString: param.NewOpt(
			"And in Lyon and Oslo?\ncall: get_weather {\"location\":\"Lyon\"}\ncall: get_weather {\"location\":\"Oslo\"}")},
	}
	create.SetExtraFields(map[string]any{"suspend": true})
	start := time.Now()
	if err := conn.Create(ctx, create); err != nil {
		return err
	}
	events := 0
	for {
		raw, err := conn.RecvRaw(ctx)
		if err != nil {
			return err
		}
		events++
		var ev event
		if err := json.Unmarshal(raw, &ev); err != nil {
			return fmt.Errorf("server event: %w", err)
		}
		switch ev.Type {
		case "response.done": // paused: run the calls, append their outputs
			if ev.Response == nil || ev.Response.RequiredAction == nil {
				return fmt.Errorf("a pause without required_action: %s", raw)
			}
			var input []map[string]any
			for _, c := range ev.Response.RequiredAction.SubmitToolOutputs.ToolCalls {
				out := weather(c.Arguments)
				fmt.Printf("suspended %s paused at event %d: %s %s -> %q (%v)\n", ev.Response.ID, ev.SequenceNumber, c.Name, c.Arguments, out, time.Since(start).Round(time.Microsecond))
				input = append(input, map[string]any{"type": "function_call_output", "call_id": c.CallID, "output": out})
			}
			appendEv, err := json.Marshal(map[string]any{"type": "response.append", "response_id": ev.Response.ID, "input": input})
			if err != nil {
				return err
			}
			if err := conn.SendRaw(ctx, appendEv); err != nil {
				return err
			}
		case "response.completed":
			var done struct{ Response responses.Response }
			if err := json.Unmarshal(raw, &done); err != nil {
				return err
			}
			fmt.Printf("suspended %s %s after %d events in one response: %q (%v)\n", done.Response.ID, done.Response.Status,
				events, done.Response.OutputText(), time.Since(start).Round(time.Microsecond))
			return nil
		case "response.failed", "response.incomplete", "response.cancelled", "error":
			return fmt.Errorf("suspended rollout ended with %s", raw)
		}
	}
}

func defaultURL() string {
	if u := os.Getenv("TETHER_URL"); u != "" {
		return u
	}
	return "http://127.0.0.1:8080/v1"
}
