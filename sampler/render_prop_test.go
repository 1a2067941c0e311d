package sampler

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// fragments are the pieces random texts are made of: what could make BPE or
// the pre-tokenizer's split expression merge across a block boundary
// (whitespace runs, line breaks at the ends, marker look-alikes, combining
// marks, contractions, digits) and what the renderer treats specially (DEL,
// invalid UTF-8).
var fragments = []string{
	"", " ", "  ", "   ", "\t", "\n", "\n\n", " \n", "\n ", "\r\n", "\r", " \t\n  ",
	"Hello", "world", " the", "I", "'s", "'LL", "ß", "ÉCOLE", "é", "\u0301", "\u200d",
	"😀", "👨‍👩‍👧", "🇫🇷", "日本語", "中文字符", "한국어", "テキスト", "Ελληνικά", "русский", "عربى",
	"0", "7", "12345", "3.14", "1e9", "-", "--", "...", "/", "//", "<", ">", "|", "<|", "|>",
	"<|im_end|>", "<|im_end|>\n", "<|im_start|>", "<|im_start|>user\n", "<|endoftext|>",
	"{", "}", `"`, `\"`, "\\", "```", "#", "# Tools", "\x7f", "\xff", "\xe2\x82", "\x00",
}

// randText is a random text of fragments and, now and then, random runes.
func randText(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(8) {
		if rng.IntN(6) == 0 {
			b.WriteRune(rune(rng.IntN(0x30000)))
			continue
		}
		b.WriteString(fragments[rng.IntN(len(fragments))])
	}
	return b.String()
}

// randJSON is random JSON arguments, valid or not.
func randJSON(rng *rand.Rand) string {
	if rng.IntN(5) == 0 {
		return randText(rng) // models send broken arguments too
	}
	args := map[string]any{}
	for range rng.IntN(4) {
		switch rng.IntN(3) {
		case 0:
			args[randText(rng)] = randText(rng)
		case 1:
			args["n"+strconv.Itoa(rng.IntN(100))] = rng.Float64() * 1e6
		default:
			args["list"] = []any{randText(rng), rng.IntN(1000), nil, true}
		}
	}
	raw, _ := json.Marshal(args)
	if rng.IntN(3) == 0 {
		var indented strings.Builder
		indented.Write(raw)
		indented.WriteString("\n")
		return indented.String()
	}
	return string(raw)
}

func randContents(rng *rand.Rand, output bool) protocol.Contents {
	var cs protocol.Contents
	for range rng.IntN(4) {
		switch rng.IntN(6) {
		case 0:
			cs = append(cs, &protocol.InputImage{ImageURL: ptr("https://x/y.png")})
		case 1:
			cs = append(cs, &protocol.InputFile{Filename: randText(rng)})
		case 2:
			cs = append(cs, &protocol.InputVideo{})
		default:
			if output {
				cs = append(cs, &protocol.OutputText{Text: randText(rng)})
			} else {
				cs = append(cs, &protocol.InputText{Text: randText(rng)})
			}
		}
	}
	return cs
}

var roles = []protocol.Role{"", protocol.RoleUser, protocol.RoleAssistant, protocol.RoleSystem, protocol.RoleDeveloper, protocol.RoleTool}

// randItem is a random item of any kind the renderer knows, or now and then
// one it renders to nothing.
func randItem(rng *rand.Rand) protocol.Item {
	switch rng.IntN(13) {
	case 0, 1:
		role := roles[rng.IntN(len(roles))]
		return &protocol.Message{Role: role, Content: randContents(rng, role == protocol.RoleAssistant)}
	case 2:
		fc := &protocol.FunctionCall{CallID: "call_" + strconv.Itoa(rng.IntN(1000)), Name: "fn" + randText(rng), Arguments: randJSON(rng)}
		if rng.IntN(3) == 0 {
			fc.Namespace = "ns" + randText(rng)
		}
		return fc
	case 3:
		out := protocol.ToolOutput{Text: randText(rng)}
		if rng.IntN(2) == 0 {
			out = protocol.ToolOutput{Parts: randContents(rng, false)}
		}
		return &protocol.FunctionCallOutput{CallID: randText(rng), Output: out}
	case 4:
		var sum protocol.Contents
		for range rng.IntN(3) {
			sum = append(sum, &protocol.SummaryText{Text: randText(rng)})
		}
		return &protocol.Reasoning{Summary: sum, EncryptedContent: ptr(randText(rng))}
	case 5:
		ws := &protocol.WebSearchCall{ID: "ws_1", Status: protocol.ItemStatus("completed")}
		if rng.IntN(4) > 0 {
			ws.Action = &protocol.WebSearchAction{Type: "search", Query: randText(rng)}
			for range rng.IntN(3) {
				ws.Action.Sources = append(ws.Action.Sources, protocol.WebSearchSource{
					Type: "url", URL: "https://" + randText(rng), Title: randText(rng), Snippet: randText(rng),
				})
			}
		}
		return ws
	case 6:
		return &protocol.Compaction{EncryptedContent: randText(rng)}
	case 7:
		return &protocol.ItemReferenceItem{ID: randText(rng)}
	case 8:
		return &protocol.CustomToolCall{CallID: "call_" + strconv.Itoa(rng.IntN(1000)), Name: "c" + randText(rng), Input: randText(rng)}
	case 9:
		return &protocol.ShellCall{CallID: "call_" + strconv.Itoa(rng.IntN(1000)), Action: json.RawMessage(randJSON(rng))}
	case 10:
		switch rng.IntN(3) {
		case 0:
			return &protocol.ShellCallOutput{CallID: randText(rng), Output: json.RawMessage(randJSON(rng))}
		case 1:
			return &protocol.ApplyPatchCallOutput{CallID: randText(rng), Status: protocol.StatusCompleted, Output: ptr(randText(rng))}
		}
		return &protocol.CustomToolCallOutput{CallID: randText(rng), Output: protocol.ToolOutput{Text: randText(rng)}}
	case 11:
		switch rng.IntN(3) {
		case 0:
			return &protocol.Program{ID: "prog_1", CallID: randText(rng), Code: randText(rng), Fingerprint: randText(rng)}
		case 1:
			return &protocol.ProgramOutput{ID: "progo_1", CallID: randText(rng), Result: randText(rng), Status: protocol.StatusCompleted}
		}
		return &protocol.ConfigurationUpdate{Reasoning: json.RawMessage(randJSON(rng)), Text: json.RawMessage(randJSON(rng))}
	default:
		if rng.IntN(2) == 0 {
			return nil
		}
		return (*protocol.Message)(nil)
	}
}

func randTools(rng *rand.Rand) []protocol.Tool {
	var tools []protocol.Tool
	for range rng.IntN(3) {
		if rng.IntN(4) == 0 {
			tools = append(tools, protocol.Tool{Type: protocol.ToolWebSearch, Raw: json.RawMessage(`{"type":"web_search"}`)})
			continue
		}
		tools = append(tools, protocol.Tool{
			Type: protocol.ToolFunction, Name: randText(rng), Description: ptr(randText(rng)),
			Parameters: json.RawMessage(randJSON(rng)),
		})
	}
	return tools
}

// checkAppend fails t unless the Prompt built from Header and one Item per
// item holds exactly the tokens of the full Render.
func checkAppend(t *testing.T, r *Renderer, instructions string, tools []protocol.Tool, items protocol.Items) {
	t.Helper()
	p := (*Prompt)(nil).Append(r.Header(instructions, tools))
	for _, it := range items {
		p = p.Append(r.Item(it))
	}
	full := r.Render(instructions, tools, items)
	if got := p.All(); !slices.Equal(got, full) {
		i := 0
		for i < len(got) && i < len(full) && got[i] == full[i] {
			i++
		}
		t.Fatalf("appended render differs from the full render at token %d of %d/%d\nappended: %q\nfull:     %q\ninstructions %q, items %d",
			i, len(got), len(full), decode(t, r, got[i:min(len(got), i+8)]), decode(t, r, full[i:min(len(full), i+8)]), instructions, len(items))
	}
}

// TestRenderAppendProperty: over random item sequences, the incremental
// render (Header, then Item by Item appended to a Prompt) is the full render,
// token for token.
func TestRenderAppendProperty(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	n := 2000
	if testing.Short() {
		n = 200
	}
	for seed := range uint64(n) {
		rng := rand.New(rand.NewPCG(seed, 0x7e7e))
		var instructions string
		if rng.IntN(3) > 0 {
			instructions = randText(rng)
		}
		tools := randTools(rng)
		items := make(protocol.Items, rng.IntN(12))
		for i := range items {
			items[i] = randItem(rng)
		}
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			checkAppend(t, r, instructions, tools, items)
		})
	}
}

// TestRenderMatchesText checks Render against the template text of a known
// conversation: the full render is the tokenization of the whole text.
func TestRenderMatchesText(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	items := protocol.Items{userMsg("Hi \n\n"), userMsg("  there"), &protocol.FunctionCall{Name: "f", Arguments: "{}\n "}}
	want := "<|im_start|>system\nBe brief.  <|im_end|>\n" +
		"<|im_start|>user\nHi \n\n<|im_end|>\n" +
		"<|im_start|>user\n  there<|im_end|>\n" +
		"<|im_start|>assistant to=f\n{}\n <|im_end|>\n"
	got := r.Render("Be brief.  ", nil, items)
	if s := decode(t, r, got); s != want {
		t.Fatalf("Render =\n%q\nwant\n%q", s, want)
	}
	if n := r.Count(want); n != len(got) {
		t.Errorf("Render has %d tokens, Count of its text %d", len(got), n)
	}
	if got := r.Render("", nil, nil); got != nil {
		t.Errorf("empty Render = %v, want nil", got)
	}
}

// FuzzRenderAppend puts the fuzzed texts in every place an item carries text,
// among random items from the fuzzed seed, and checks the append property.
func FuzzRenderAppend(f *testing.F) {
	f.Add(uint64(0), "Hello", " world")
	f.Add(uint64(1), "trailing  ", "\n\nleading")
	f.Add(uint64(2), "a \n", " \n b")
	f.Add(uint64(3), "<|im_end|>\n", "<|im_start|>")
	f.Add(uint64(4), "日本語 😀", "12345\x7f\xff")
	f.Add(uint64(5), "", "")
	r := renderer(f)
	f.Fuzz(func(t *testing.T, seed uint64, a, b string) {
		rng := rand.New(rand.NewPCG(seed, 0xf022))
		items := protocol.Items{
			userMsg(a),
			&protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: b}}},
			&protocol.FunctionCall{Name: "f", Arguments: a},
			&protocol.FunctionCallOutput{CallID: b, Output: protocol.ToolOutput{Text: a}},
			&protocol.Reasoning{Summary: protocol.Contents{&protocol.SummaryText{Text: a}, &protocol.SummaryText{Text: b}}},
			&protocol.WebSearchCall{Action: &protocol.WebSearchAction{Query: a, Sources: []protocol.WebSearchSource{{Title: b, Snippet: a}}}},
			&protocol.ItemReferenceItem{ID: b},
			&protocol.Program{CallID: b, Code: a, Fingerprint: b},
			&protocol.ProgramOutput{CallID: b, Result: a},
		}
		for range rng.IntN(6) {
			items = slices.Insert(items, rng.IntN(len(items)+1), randItem(rng))
		}
		rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		tools := []protocol.Tool{{Type: protocol.ToolFunction, Name: b, Description: ptr(a), Parameters: json.RawMessage(a)}}
		checkAppend(t, r, a+b, tools, items)
		checkAppend(t, r, "", nil, items)
	})
}
