package sampler_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// ExampleScripted plays a two-turn rollout against the scripted model: the
// user's message scripts a tool call, the client answers it, and the model
// quotes the output.
func ExampleScripted() {
	r, err := sampler.NewRenderer()
	if err != nil {
		log.Fatal(err)
	}
	model := sampler.NewScripted(r, sampler.Pacing{}) // unpaced
	req := &sampler.Request{
		Model: sampler.ScriptedModel,
		Items: protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{
			&protocol.InputText{Text: "What's the weather in Paris?\ncall: get_weather {\"location\":\"Paris\"}"},
		}}},
	}
	// The runtime keeps the rendered context and appends to it item by item.
	prompt := (*sampler.Prompt)(nil).Append(r.Header("You are helpful.", nil))
	for _, it := range req.Items {
		prompt = prompt.Append(r.Item(it))
	}
	req.Prompt = prompt

	for turn := 1; ; turn++ {
		var buf strings.Builder
		var call *protocol.FunctionCall
		res, err := model.Sample(context.Background(), req, func(d sampler.Delta) {
			switch d.Kind {
			case sampler.CallStart:
				call = &protocol.FunctionCall{CallID: d.CallID, Name: d.Name}
			case sampler.TextDelta, sampler.ArgsDelta:
				buf.WriteString(d.Text)
			case sampler.PartEnd:
				if call != nil {
					call.Arguments = buf.String()
				}
			}
		})
		if err != nil {
			log.Fatal(err)
		}
		if call == nil {
			fmt.Printf("turn %d: %q (%d tokens)\n", turn, buf.String(), res.OutputTokens)
			return
		}
		fmt.Printf("turn %d: %s(%s) (%d tokens)\n", turn, call.Name, call.Arguments, res.OutputTokens)
		out := &protocol.FunctionCallOutput{CallID: call.CallID, Output: protocol.ToolOutput{Text: "18°C, clear"}}
		req.Items = append(req.Items, call, out)
		req.Prompt = req.Prompt.Append(r.Item(call)).Append(r.Item(out))
	}
	// Output:
	// turn 1: get_weather({"location":"Paris"}) (5 tokens)
	// turn 2: "get_weather returned: 18°C, clear" (9 tokens)
}
