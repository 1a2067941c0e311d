package traceimport

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"strings"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// Redact replaces what t says with what cannot be read back, keeping its
// shape: every text (the task, the model's messages, the calls' arguments
// and outputs) becomes filler words of the same length in bytes, line by
// line, chosen by a hash of the original, so that equal texts stay equal
// (a replay matches a call's output by its name and arguments) and sizes,
// and so token counts, stay near the original's; tool names become
// "tool_" and a hash. A function call's arguments stay JSON: their keys
// (the tool's parameter names) are kept, their string values redacted.
// Timings and token counts are kept. The history before the turn is
// redacted the same way, item by item.
func Redact(t *sampler.Trace) {
	t.Task = filler(t.Task)
	for i := range t.Steps {
		st := &t.Steps[i]
		st.Text = filler(st.Text)
		for j := range st.Calls {
			c := &st.Calls[j]
			c.Name = toolName(c.Name)
			c.Output = filler(c.Output)
			if c.Type == sampler.CustomCall {
				c.Arguments = filler(c.Arguments)
			} else {
				c.Arguments = redactJSON(c.Arguments)
			}
		}
	}
	for i, it := range t.History {
		t.History[i] = redactItem(it)
	}
}

// toolName is a tool's name redacted.
func toolName(name string) string { return "tool_" + hash(name)[:8] }

// redactItem is a history item redacted, as Redact redacts a step: the
// items of an import (messages of text, calls and their text outputs).
func redactItem(it protocol.Item) protocol.Item {
	switch it := it.(type) {
	case *protocol.Message:
		m := &protocol.Message{Role: it.Role}
		for _, c := range it.Content {
			switch c := c.(type) {
			case *protocol.InputText:
				m.Content = append(m.Content, &protocol.InputText{Text: filler(c.Text)})
			case *protocol.OutputText:
				m.Content = append(m.Content, &protocol.OutputText{Text: filler(c.Text)})
			}
		}
		return m
	case *protocol.FunctionCall:
		return &protocol.FunctionCall{CallID: it.CallID, Name: toolName(it.Name), Arguments: redactJSON(it.Arguments)}
	case *protocol.CustomToolCall:
		return &protocol.CustomToolCall{CallID: it.CallID, Name: toolName(it.Name), Input: filler(it.Input)}
	case *protocol.FunctionCallOutput:
		return &protocol.FunctionCallOutput{CallID: it.CallID, Output: protocol.ToolOutput{Text: filler(it.Output.Text)}}
	case *protocol.CustomToolCallOutput:
		return &protocol.CustomToolCallOutput{CallID: it.CallID, Output: protocol.ToolOutput{Text: filler(it.Output.Text)}}
	}
	return it
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// fillerWords are common English words: filler made of them tokenizes
// about as densely as prose.
var fillerWords = strings.Fields(`the of and to in is it that for on with as was at by this be from or
are an but not have one all were when we there can had which their if do will each about how up out them
then she many some so these would other into has more her two like him see time could no make than
first been its who now people my made over did down only way find use may water long little very after
words called just where most know get through back much go good new write our used me man too any day
same right look think also around another came come work three word must because does part even place
well such here take why things help put years different away again off went old number`)

// filler is s's length in bytes of filler words, line by line.
func filler(s string) string {
	if s == "" {
		return ""
	}
	h := sha256.Sum256([]byte(s))
	rng := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(h[:8]), binary.LittleEndian.Uint64(h[8:16])))
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		var b strings.Builder
		for b.Len() < len(l) {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(fillerWords[rng.IntN(len(fillerWords))])
		}
		lines[i] = b.String()[:len(l)]
	}
	return strings.Join(lines, "\n")
}

// redactJSON redacts the string values of a JSON text, keeping its keys,
// numbers and structure; text that is not JSON is filler.
func redactJSON(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return filler(s)
	}
	b, err := json.Marshal(redactValue(v))
	if err != nil {
		return filler(s)
	}
	return string(b)
}

func redactValue(v any) any {
	switch v := v.(type) {
	case string:
		return filler(v)
	case []any:
		for i := range v {
			v[i] = redactValue(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = redactValue(v[k])
		}
	}
	return v
}
