package sampler

import (
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tether-run/tether/protocol"
)

var (
	testRendererOnce sync.Once
	testRenderer     *Renderer
	testRendererErr  error
)

// renderer is one Renderer shared by the tests, which also checks that it is
// safe for concurrent use (the tests run in parallel under -race).
func renderer(tb testing.TB) *Renderer {
	tb.Helper()
	testRendererOnce.Do(func() { testRenderer, testRendererErr = NewRenderer() })
	if testRendererErr != nil {
		tb.Fatalf("NewRenderer: %v", testRendererErr)
	}
	return testRenderer
}

// decode turns tokens back into text.
func decode(tb testing.TB, r *Renderer, toks []Token) string {
	tb.Helper()
	s, err := r.codec.Decode(toks)
	if err != nil {
		tb.Fatalf("Decode: %v", err)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func userMsg(text string) *protocol.Message {
	return &protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: text}}}
}

func TestHeader(t *testing.T) {
	t.Parallel()
	weather := protocol.Tool{
		Type:        protocol.ToolFunction,
		Name:        "get_weather",
		Description: ptr("Current weather.\nUse it often."),
		Parameters: json.RawMessage(`{ "type": "object",
			"properties": {"location": {"type": "string"}} }`),
	}
	bare := protocol.Tool{Type: protocol.ToolFunction, Name: "noop"}
	search := protocol.Tool{Type: protocol.ToolWebSearch, Raw: json.RawMessage(`{"type": "web_search"}`)}
	tests := []struct {
		name         string
		instructions string
		tools        []protocol.Tool
		want         string
	}{
		{"empty", "", nil, ""},
		{"instructions only", "Be brief.", nil, "<|im_start|>system\nBe brief.<|im_end|>\n"},
		{"tools only", "", []protocol.Tool{bare}, "<|im_start|>system\n# Tools\nnoop: ; parameters: {}<|im_end|>\n"},
		{
			"namespace and custom", "", []protocol.Tool{{Type: protocol.ToolNamespace, Name: "agents", Description: ptr("Sub-agents."),
				Tools: []protocol.Tool{bare, {Type: protocol.ToolCustom, Name: "exec"}}},
				{Type: protocol.ToolCustom, Name: "apply_patch", Description: ptr("Edit."),
					Format: &protocol.CustomFormat{Type: "grammar", Syntax: "lark", Definition: "start: a\na: \"x\""}}},
			"<|im_start|>system\n# Tools\nagents: Sub-agents.; namespace\nagents.noop: ; parameters: {}\nagents.exec: ; format: text\n" +
				`apply_patch: Edit.; format: grammar lark: start: a a: "x"` + "<|im_end|>\n",
		},
		{
			"both", "Be brief.", []protocol.Tool{weather, search},
			"<|im_start|>system\nBe brief.\n# Tools\n" +
				`get_weather: Current weather. Use it often.; parameters: {"type":"object","properties":{"location":{"type":"string"}}}` + "\n" +
				`web_search: hosted tool; parameters: {"type":"web_search"}` +
				"<|im_end|>\n",
		},
	}
	r := renderer(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := r.Header(tt.instructions, tt.tools)
			if tt.want == "" {
				if got != nil {
					t.Fatalf("Header = %v, want nil", got)
				}
				return
			}
			if s := decode(t, r, got); s != tt.want {
				t.Errorf("Header renders\n%q\nwant\n%q", s, tt.want)
			}
			if want := r.Count(tt.want); len(got) != want {
				t.Errorf("Header has %d tokens, want %d", len(got), want)
			}
		})
	}
}

func TestItem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		item protocol.Item
		want string
	}{
		{"user", userMsg("Hi there"), "<|im_start|>user\nHi there<|im_end|>\n"},
		{"assistant parts", &protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{
			&protocol.OutputText{Text: "Hello"}, &protocol.OutputText{Text: ", world"},
		}}, "<|im_start|>assistant\nHello, world<|im_end|>\n"},
		{"developer", &protocol.Message{Role: protocol.RoleDeveloper, Content: protocol.Contents{&protocol.InputText{Text: "rules"}}},
			"<|im_start|>developer\nrules<|im_end|>\n"},
		{"image and file", &protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{
			&protocol.InputText{Text: "look: "},
			&protocol.InputImage{ImageURL: ptr("data:image/png;base64," + strings.Repeat("A", 5000))},
			&protocol.InputFile{Filename: "a.pdf", FileData: strings.Repeat("B", 5000)},
		}}, "<|im_start|>user\nlook: [image][file a.pdf]<|im_end|>\n"},
		{"namespaced call", &protocol.FunctionCall{CallID: "call_1", Name: "wait_agent", Namespace: "multi_agent_v1", Arguments: `{}`},
			"<|im_start|>assistant to=multi_agent_v1.wait_agent\n{}<|im_end|>\n"},
		{"function call", &protocol.FunctionCall{CallID: "call_1", Name: "get_weather", Arguments: `{"location":"Paris"}`},
			"<|im_start|>assistant to=get_weather\n{\"location\":\"Paris\"}<|im_end|>\n"},
		{"output text", &protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Text: "sunny"}},
			"<|im_start|>tool call_id=call_1\nsunny<|im_end|>\n"},
		{"output parts", &protocol.FunctionCallOutput{CallID: "call_2", Output: protocol.ToolOutput{Parts: protocol.Contents{
			&protocol.InputText{Text: "chart: "}, &protocol.InputImage{ImageURL: ptr("https://x/y.png")},
		}}}, "<|im_start|>tool call_id=call_2\nchart: [image]<|im_end|>\n"},
		{"reasoning", &protocol.Reasoning{
			Summary:          protocol.Contents{&protocol.SummaryText{Text: "first"}, &protocol.SummaryText{Text: "second"}},
			EncryptedContent: ptr("opaque-secret"),
		}, "<|im_start|>assistant analysis\nfirst\nsecond<|im_end|>\n"},
		{"compaction", &protocol.Compaction{EncryptedContent: strings.Repeat("z", 1234)},
			"<|im_start|>system\n[compacted context: 1234 bytes]<|im_end|>\n"},
		{"reference", &protocol.ItemReferenceItem{ID: "msg_9"}, "<|im_start|>system\n[ref msg_9]<|im_end|>\n"},
		{"mcp tools", &protocol.MCPListTools{ServerLabel: "docs", Tools: []protocol.MCPToolInfo{{Name: "search", Description: ptr("Find pages."), InputSchema: []byte(`{"type":"object"}`)}}},
			"<|im_start|>system\n# Tools of MCP server docs\ndocs.search: Find pages. {\"type\":\"object\"}<|im_end|>\n"},
		{"mcp call", &protocol.MCPCall{ServerLabel: "docs", Name: "search", Arguments: `{"q": "x"}`, Output: ptr("2 pages")},
			"<|im_start|>assistant to=docs.search\n{\"q\":\"x\"}<|im_end|>\n<|im_start|>tool docs.search\n2 pages<|im_end|>\n"},
		{"mcp call failed", &protocol.MCPCall{ServerLabel: "docs", Name: "search", Arguments: `{}`, Error: []byte(`"boom"`)},
			"<|im_start|>assistant to=docs.search\n{}<|im_end|>\n<|im_start|>tool docs.search\nerror: \"boom\"<|im_end|>\n"},
		{"mcp approval", &protocol.MCPApprovalRequest{ServerLabel: "docs", Name: "search", Arguments: `{}`},
			"<|im_start|>assistant to=docs.search approval\n{}<|im_end|>\n"},
		{"mcp approved", &protocol.MCPApprovalResponse{ApprovalRequestID: "r", Approve: true},
			"<|im_start|>user approval\napproved<|im_end|>\n"},
		{"multi-agent call", &protocol.MultiAgentCall{CallID: "c1", Action: protocol.ActionSpawnAgent, Arguments: `{"task_name": "a", "message": "go"}`},
			"<|im_start|>assistant to=multi_agent.spawn_agent\n{\"task_name\":\"a\",\"message\":\"go\"}<|im_end|>\n"},
		{"multi-agent output", &protocol.MultiAgentCallOutput{CallID: "c1", Action: protocol.ActionSpawnAgent, Output: protocol.Contents{&protocol.OutputText{Text: `{"task_name":"/root/a"}`}}},
			"<|im_start|>tool call_id=c1\n{\"task_name\":\"/root/a\"}<|im_end|>\n"},
		{"agent message", &protocol.AgentMessage{Author: "/root/a", Recipient: "/root", Content: protocol.Contents{&protocol.OutputText{Text: "done"}}},
			"<|im_start|>agent /root/a to=/root\ndone<|im_end|>\n"},
		{"program", &protocol.Program{ID: "prog_1", CallID: "call_p", Code: "const w = await tools.get_weather({});\nreturn w;", Fingerprint: "opaque-fingerprint"},
			"<|im_start|>assistant to=programmatic_tool_calling\nconst w = await tools.get_weather({});\nreturn w;<|im_end|>\n"},
		{"program output", &protocol.ProgramOutput{ID: "progo_1", CallID: "call_p", Result: "rain", Status: protocol.StatusCompleted},
			"<|im_start|>tool call_id=call_p\nrain<|im_end|>\n"},
		{"configuration update", &protocol.ConfigurationUpdate{Reasoning: []byte(`{"effort": "low"}`), Text: []byte(`{"format": {"type": "text"}}`)},
			"<|im_start|>system\n# Configuration update\nreasoning: {\"effort\":\"low\"}\ntext: {\"format\":{\"type\":\"text\"}}<|im_end|>\n"},
		{"configuration update of the text", &protocol.ConfigurationUpdate{Reasoning: []byte(`null`), Text: []byte(`{"format":{"type":"text"}}`)},
			"<|im_start|>system\n# Configuration update\ntext: {\"format\":{\"type\":\"text\"}}<|im_end|>\n"},
		{"invalid utf8", userMsg("a\xffb"), "<|im_start|>user\na\uFFFDb<|im_end|>\n"},
		{"delete", userMsg("a\x7f\x7fb"), "<|im_start|>user\na\x7f\x7fb<|im_end|>\n"},
		{"nil", nil, ""},
		{"typed nil", (*protocol.Message)(nil), ""},
	}
	r := renderer(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := r.Item(tt.item)
			if s := decode(t, r, got); s != tt.want {
				t.Errorf("Item renders\n%q\nwant\n%q", s, tt.want)
			}
			if want := r.Count(tt.want); len(got) != want {
				t.Errorf("Item has %d tokens, want %d", len(got), want)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want []string // nil: only check the concatenation
	}{
		{"empty", "", nil},
		{"words", "Hello world", []string{"Hello", " world"}},
		{"newlines", "a\n\n  b", nil},
		{"unicode", "héllo wörld ✓ 日本語", nil},
		{"invalid utf8", "ok\xff\xfe!", []string{"ok", "\xff", "\xfe", "!"}},
		{"truncated rune", "x\xe2\x82", []string{"x", "\xe2", "\x82"}},
		{"code", "func main() {\n\tfmt.Println(\"hi\")\n}\n", nil},
		{"delete", "a\x7fb", []string{"a", "\x7f", "b"}},
		{"delete alone", "\x7f", []string{"\x7f"}},
	}
	r := renderer(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := r.Tokens(tt.text)
			if s := strings.Join(got, ""); s != tt.text {
				t.Fatalf("Tokens(%q) joins to %q", tt.text, s)
			}
			if tt.want != nil && !slices.Equal(got, tt.want) {
				t.Errorf("Tokens(%q) = %q, want %q", tt.text, got, tt.want)
			}
			if n := r.Count(tt.text); n != len(got) {
				t.Errorf("Count(%q) = %d, want %d", tt.text, n, len(got))
			}
		})
	}
}

func FuzzTokens(f *testing.F) {
	for _, s := range []string{"", "Hello world", "a\xffb", "  \n\t x", "日本語テキスト", "{\"a\": [1, 2.5e3]}"} {
		f.Add(s)
	}
	r := renderer(f)
	f.Fuzz(func(t *testing.T, text string) {
		toks := r.Tokens(text)
		if s := strings.Join(toks, ""); s != text {
			t.Fatalf("Tokens(%q) joins to %q", text, s)
		}
		for _, tok := range toks {
			if tok == "" {
				t.Fatalf("Tokens(%q) has an empty token", text)
			}
		}
		if n := r.Count(text); n != len(toks) {
			t.Fatalf("Count(%q) = %d, len(Tokens) = %d", text, n, len(toks))
		}
		valid := strings.ToValidUTF8(text, "\uFFFD")
		if s := decode(t, r, r.encode(valid)); s != valid {
			t.Fatalf("encode(%q) decodes to %q", valid, s)
		}
	})
}

func TestPromptForks(t *testing.T) {
	t.Parallel()
	var empty *Prompt
	if empty.Len() != 0 || empty.Items() != 0 || len(empty.All()) != 0 {
		t.Fatalf("nil Prompt: Len %d, Items %d, All %v", empty.Len(), empty.Items(), empty.All())
	}
	buf := []Token{1, 2, 3}
	base := empty.Append(buf).Append(nil).Append([]Token{4})
	buf[0] = 99 // the caller reuses its slice
	left := base.Append([]Token{5, 6})
	right := base.Append([]Token{7})
	deep := left.Append([]Token{8})

	tests := []struct {
		name  string
		p     *Prompt
		want  []Token
		items int
	}{
		{"base", base, []Token{1, 2, 3, 4}, 3},
		{"left", left, []Token{1, 2, 3, 4, 5, 6}, 4},
		{"right", right, []Token{1, 2, 3, 4, 7}, 4},
		{"deep", deep, []Token{1, 2, 3, 4, 5, 6, 8}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.p.All(); !slices.Equal(got, tt.want) {
				t.Errorf("All = %v, want %v", got, tt.want)
			}
			if tt.p.Len() != len(tt.want) || tt.p.Items() != tt.items {
				t.Errorf("Len, Items = %d, %d, want %d, %d", tt.p.Len(), tt.p.Items(), len(tt.want), tt.items)
			}
		})
	}
}

// TestPromptConcurrentForks appends to one parent from many goroutines.
func TestPromptConcurrentForks(t *testing.T) {
	t.Parallel()
	base := (*Prompt)(nil).Append([]Token{1, 2})
	const n = 16
	forks := make([]*Prompt, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { forks[i] = base.Append([]Token{Token(100 + i)}).Append([]Token{Token(i)}) })
	}
	wg.Wait()
	for i, f := range forks {
		if want := []Token{1, 2, Token(100 + i), Token(i)}; !slices.Equal(f.All(), want) {
			t.Errorf("fork %d: All = %v, want %v", i, f.All(), want)
		}
	}
}

// TestPromptIsFullRender checks that a Prompt built item by item is the render
// of the whole conversation, and what that render looks like.
func TestPromptIsFullRender(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	tools := []protocol.Tool{{Type: protocol.ToolFunction, Name: "read_file", Description: ptr("Read a file."),
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}}
	items := protocol.Items{
		userMsg("Show me the README."),
		&protocol.Reasoning{Summary: protocol.Contents{&protocol.SummaryText{Text: "Need the file."}}},
		&protocol.FunctionCall{CallID: "call_a", Name: "read_file", Arguments: `{"path":"README.md"}`},
		&protocol.FunctionCallOutput{CallID: "call_a", Output: protocol.ToolOutput{Text: "# tether\n"}},
		&protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: "It is a title."}}},
		&protocol.Compaction{EncryptedContent: "abcdef"},
		&protocol.ItemReferenceItem{ID: "msg_1"},
	}
	want := "<|im_start|>system\nYou are terse.\n# Tools\n" +
		`read_file: Read a file.; parameters: {"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}<|im_end|>` + "\n" +
		"<|im_start|>user\nShow me the README.<|im_end|>\n" +
		"<|im_start|>assistant analysis\nNeed the file.<|im_end|>\n" +
		"<|im_start|>assistant to=read_file\n{\"path\":\"README.md\"}<|im_end|>\n" +
		"<|im_start|>tool call_id=call_a\n# tether\n<|im_end|>\n" +
		"<|im_start|>assistant\nIt is a title.<|im_end|>\n" +
		"<|im_start|>system\n[compacted context: 6 bytes]<|im_end|>\n" +
		"<|im_start|>system\n[ref msg_1]<|im_end|>\n"

	p := (*Prompt)(nil).Append(r.Header("You are terse.", tools))
	concat := slices.Clone(r.Header("You are terse.", tools))
	for _, it := range items {
		toks := r.Item(it)
		concat = append(concat, toks...)
		p = p.Append(toks)
	}
	if !slices.Equal(p.All(), concat) {
		t.Fatalf("Prompt.All differs from the concatenated renders")
	}
	if got := decode(t, r, p.All()); got != want {
		t.Errorf("render:\n%s\nwant:\n%s", got, want)
	}
	if p.Items() != len(items)+1 || p.Len() != len(concat) {
		t.Errorf("Items, Len = %d, %d, want %d, %d", p.Items(), p.Len(), len(items)+1, len(concat))
	}
}

func TestPromptAppendAllocs(t *testing.T) {
	p := (*Prompt)(nil)
	for range 1000 {
		p = p.Append([]Token{1, 2, 3})
	}
	toks := make([]Token, 64)
	allocs := testing.AllocsPerRun(100, func() { _ = p.Append(toks) })
	if allocs > 2 {
		t.Errorf("Append allocates %v times, want at most 2 (segment and token copy)", allocs)
	}
}

func loadBlob(b *testing.B) string {
	b.Helper()
	blob, err := os.ReadFile("testdata/blob.txt")
	if err != nil {
		b.Fatal(err)
	}
	return string(blob)
}

// BenchmarkTokenize splits a 10 KB mix of Go source and English prose into
// tokens, as streaming and rendering do.
func BenchmarkTokenize(b *testing.B) {
	r := renderer(b)
	blob := loadBlob(b)
	n := len(r.Tokens(blob))
	b.SetBytes(int64(len(blob)))
	b.ReportAllocs()
	for b.Loop() {
		r.Tokens(blob)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
	b.ReportMetric(float64(n), "tokens/op")
}

// BenchmarkRenderItem renders one user message holding the 10 KB blob.
func BenchmarkRenderItem(b *testing.B) {
	r := renderer(b)
	msg := userMsg(loadBlob(b))
	n := len(r.Item(msg))
	b.ReportAllocs()
	for b.Loop() {
		r.Item(msg)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// promptSink makes appended segments escape, as they do in the runtime.
var promptSink *Prompt

// BenchmarkPromptAppend appends a 200-token item to prompts of growing
// history: the cost must not depend on the history.
func BenchmarkPromptAppend(b *testing.B) {
	item := make([]Token, 200)
	for _, history := range []int{0, 100, 10000} {
		var p *Prompt
		for range history {
			p = p.Append(item)
		}
		b.Run("history="+strconv.Itoa(history), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				promptSink = p.Append(item)
			}
		})
	}
}

// TestPromptPacked: tokens of every packed width (1, 2 and 3 bytes, and
// beyond o200k_base's ids) come back from All as they went in.
func TestPromptPacked(t *testing.T) {
	want := []Token{0, 127, 128, 16383, 16384, 199_997, 1 << 21, 1<<32 - 1}
	p := (*Prompt)(nil).Append(want[:3]).Append(nil).Append(want[3:])
	if got := p.All(); !slices.Equal(got, want) || p.Len() != len(want) || p.Items() != 3 {
		t.Fatalf("All = %v (Len %d, Items %d), want %v", got, p.Len(), p.Items(), want)
	}
	if p.hash() != (*Prompt)(nil).Append(want).hash() {
		t.Fatal("the hash depends on how the tokens were split into items")
	}
}
