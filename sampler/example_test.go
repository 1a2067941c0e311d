package sampler_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
	"github.com/tether-run/tether/sampler/enginemodel"
)

// ExampleScripted plays a two-turn rollout against the scripted model: the
// user's message scripts a tool call, the client answers it, and the model
// quotes the output.
func ExampleScripted() {
	r, err := sampler.NewRenderer()
	if err != nil {
		log.Fatal(err)
	}
	model := sampler.NewScripted(r, sampler.Timing{}) // unpaced
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

// ExamplePrefixCache shows the prefix cache matching a conversation by
// content: the second turn arrives re-rendered from the whole history, as
// over stateless HTTP, and still finds the first turn's prompt.
func ExamplePrefixCache() {
	r, err := sampler.NewRenderer()
	if err != nil {
		log.Fatal(err)
	}
	cache := sampler.NewPrefixCache(r, sampler.PrefixCacheOptions{})
	timing := sampler.Timing{TTFT: 100 * time.Millisecond, PrefillRate: 1000, TPS: 50}
	render := func(items protocol.Items) *sampler.Prompt {
		var p *sampler.Prompt
		for _, it := range items {
			p = p.Append(r.Item(it))
		}
		return p
	}
	items := protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{
		&protocol.InputText{Text: "List the files."}}}}
	for turn := 1; turn <= 2; turn++ {
		req := &sampler.Request{Instructions: "You are a coding agent.", Items: items, Prompt: render(items)}
		prompt, cached := cache.Prefill(req)
		fmt.Printf("turn %d: %d prompt tokens, %d cached; first token after %v\n",
			turn, prompt, cached, timing.FirstToken(prompt-cached))
		items = append(items,
			&protocol.FunctionCall{CallID: "call_1", Name: "ls", Arguments: "{}"},
			&protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Text: "go.mod main.go"}})
	}
	// Output:
	// turn 1: 36 prompt tokens, 0 cached; first token after 136ms
	// turn 2: 78 prompt tokens, 36 cached; first token after 142ms
}

// ExampleEngine paces two backends' samples with one engine: every sample
// due at a wake-up is stepped in it, as one batch.
func ExampleEngine() {
	r, err := sampler.NewRenderer()
	if err != nil {
		panic(err)
	}
	engine := sampler.NewEngine()
	fast := sampler.NewScripted(r, sampler.Timing{TPS: 2000})
	slow := sampler.NewScripted(r, sampler.Timing{TPS: 500, TTFT: 5 * time.Millisecond})
	fast.SetEngine(engine)
	slow.SetEngine(engine)

	req := &sampler.Request{Items: protocol.Items{&protocol.Message{Role: protocol.RoleUser,
		Content: protocol.Contents{&protocol.InputText{Text: "Say something."}}}}}
	var wg sync.WaitGroup
	var tokens atomic.Int64
	for _, model := range []*sampler.Scripted{fast, slow, fast, slow} {
		wg.Go(func() {
			res, _ := model.Sample(context.Background(), req, func(sampler.Delta) {})
			tokens.Add(int64(res.OutputTokens))
		})
	}
	wg.Wait()
	st := engine.Stats()
	fmt.Println("tokens streamed:", tokens.Load(), "stepped by the engine:", st.Tokens, "still in it:", st.Active)
	// Output: tokens streamed: 28 stepped by the engine: 28 still in it: 0
}

// ExampleEngineModel serves the scripted model on a simulated inference
// engine: the same question asked twice finds its prompt in the engine's
// KV cache the second time (its full blocks of 16 tokens: the last,
// partial one is computed again, as in vLLM), and each result says what
// the engine did, in its own clock (here a thousand times the real one).
func ExampleEngineModel() {
	r, err := sampler.NewRenderer()
	if err != nil {
		log.Fatal(err)
	}
	model, err := sampler.NewEngineModel(sampler.EngineModelOptions{Profile: enginemodel.Llama3_8B_A100(), Speed: 1000})
	if err != nil {
		log.Fatal(err)
	}
	engine := sampler.NewEngine()
	engine.SetModel(model)
	scripted := sampler.NewScripted(r, sampler.Timing{})
	scripted.SetEngine(engine)
	question := strings.Repeat("Tell me about the KV cache. ", 20)
	for range 2 {
		res, err := scripted.Sample(context.Background(), &sampler.Request{Items: protocol.Items{protocol.UserMessage(question)}}, func(sampler.Delta) {})
		if err != nil {
			log.Fatal(err)
		}
		e := res.Engine
		fmt.Printf("%s: %d prompt tokens, %d prefilled, %d found in the cache\n", e.Label, res.PromptTokens, e.Recomputed, e.Hit)
	}
	// Output:
	// simulated engine llama3-8b-a100, discard, time ×1000: 154 prompt tokens, 154 prefilled, 0 found in the cache
	// simulated engine llama3-8b-a100, discard, time ×1000: 154 prompt tokens, 10 prefilled, 144 found in the cache
}
