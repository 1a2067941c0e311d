package runtime

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/tether-run/tether/protocol"
)

func fc(id string) *protocol.FunctionCall { return &protocol.FunctionCall{CallID: id, Name: "f"} }
func fco(id string) *protocol.FunctionCallOutput {
	return &protocol.FunctionCallOutput{CallID: id, Output: protocol.ToolOutput{Text: "ok"}}
}

// TestCheckOutputs: an output answers the newest call of its id before it
// in the input, else in the context; the first failure in input order is
// the error, with its param.
func TestCheckOutputs(t *testing.T) {
	ctx := protocol.Items{fc("a"), &protocol.CustomToolCall{CallID: "b", Name: "c"}, fc("x")}
	custom := &protocol.CustomToolCallOutput{CallID: "b"}
	for _, tt := range []struct {
		name  string
		input protocol.Items
		code  string
		param string
	}{
		{"from the context", protocol.Items{fco("a"), custom}, "", ""},
		{"from the input", protocol.Items{fc("n"), fco("n")}, "", ""},
		{"call after its output", protocol.Items{fco("n"), fc("n")}, protocol.CodeToolCallNotFound, "input[0].call_id"},
		{"type mismatch in the context", protocol.Items{fco("b")}, protocol.CodeToolOutputMismatch, "input[0].type"},
		{"newest call wins", protocol.Items{&protocol.CustomToolCall{CallID: "a", Name: "c"}, &protocol.CustomToolCallOutput{CallID: "a"}}, "", ""},
		{"first failure in input order", protocol.Items{fco("zz"), fc("m"), &protocol.CustomToolCallOutput{CallID: "m"}}, protocol.CodeToolCallNotFound, "input[0].call_id"},
		{"local shell output by the call's id", protocol.Items{&protocol.LocalShellCall{ID: "lsh_1", CallID: "call_9"}, &protocol.LocalShellCallOutput{ID: "lsh_1"}}, "", ""},
	} {
		perr := checkOutputs(tt.input, nil, ctx)
		switch {
		case tt.code == "" && perr != nil:
			t.Errorf("%s: %v", tt.name, perr)
		case tt.code != "" && (perr == nil || perr.Code != tt.code || perr.Param != tt.param):
			t.Errorf("%s: got %v, want %s at %s", tt.name, perr, tt.code, tt.param)
		}
	}
}

// BenchmarkCheckOutputs: n calls then their n outputs, the shape that was
// quadratic. The time per pair must not grow with n.
func BenchmarkCheckOutputs(b *testing.B) {
	for _, n := range []int{1000, 10000, 40000} {
		input := make(protocol.Items, 0, 2*n)
		for i := range n {
			input = append(input, fc("call_"+strconv.Itoa(i)))
		}
		for i := range n {
			input = append(input, fco("call_"+strconv.Itoa(i)))
		}
		b.Run(fmt.Sprint("pairs=", n), func(b *testing.B) {
			for b.Loop() {
				if perr := checkOutputs(input, nil, nil); perr != nil {
					b.Fatal(perr)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/pair")
		})
	}
}
