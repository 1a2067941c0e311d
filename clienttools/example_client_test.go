package clienttools_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// ExampleClient_Run runs one suspended rollout against an in-process tether
// with one client tool: the server pauses on the model's call, the client
// runs the tool and appends its output, and the rollout ends in the same
// response.
func ExampleClient_Run() {
	srv, _ := runtime.NewServer(runtime.Options{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	weather := clienttools.Func{
		Name:        "get_weather",
		Description: "The weather in a city.",
		Parameters:  []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		Run: func(ctx context.Context, args string) (string, error) {
			return "Sunny, 21°C", nil
		},
	}
	c := &clienttools.Client{BaseURL: hs.URL + "/v1"}
	res, err := c.Run(context.Background(), clienttools.Rollout{
		Mode: clienttools.ModeSuspend,
		Request: &protocol.CreateRequest{Model: "tether-scripted", Input: protocol.Items{&protocol.Message{
			Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "call: get_weather {\"city\":\"Lyon\"}"}}}}},
		Funcs: []clienttools.Func{weather},
	})
	if err != nil {
		panic(err)
	}
	for _, call := range res.Calls {
		fmt.Println(call.Name, call.Arguments, "->", call.Output)
	}
	fmt.Println(res.Response.Status, len(res.Turns), "turns")
	last := res.Output[len(res.Output)-1].(*protocol.Message)
	fmt.Println(strings.Contains(last.Content[0].(*protocol.OutputText).Text, "Sunny"))
	// Output:
	// get_weather {"city":"Lyon"} -> Sunny, 21°C
	// completed 2 turns
	// true
}

// ExampleClient_Branch is a best-of-3 over one tool call: the suspended
// rollout parks on its call, response.fork clones it three ways on the
// same connection, and each fork goes on with its own output.
func ExampleClient_Branch() {
	srv, _ := runtime.NewServer(runtime.Options{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	c := &clienttools.Client{BaseURL: hs.URL} // with or without /v1
	ro := clienttools.Rollout{
		Mode: clienttools.ModeSuspend,
		Request: &protocol.CreateRequest{Model: "tether-scripted", Input: protocol.Items{
			protocol.UserMessage("Pick a timeout.\ncall: read_config {\"path\":\"client.toml\"}")}},
		Funcs: []clienttools.Func{{Name: "read_config", Parameters: []byte(`{"type":"object"}`)}},
	}
	var branches []clienttools.Branch
	for _, timeout := range []string{"5s", "30s", "2m"} {
		branches = append(branches, clienttools.Branch{Output: func(clienttools.Call) (string, error) {
			return "timeout = " + timeout, nil
		}})
	}
	results, err := c.Branch(context.Background(), ro, branches)
	if err != nil {
		panic(err)
	}
	for _, res := range results {
		fmt.Println(res.Response.Status, res.Text())
	}
	// Output:
	// completed read_config returned: timeout = 5s
	// completed read_config returned: timeout = 30s
	// completed read_config returned: timeout = 2m
}
