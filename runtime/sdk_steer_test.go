package runtime_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// TestSDKSteerSuccessor: openai-go's WebSocket client steers a running
// turn, and every event of it decodes as a variant the SDK knows: the
// steer accepted, the turn incomplete ("steered"), then its successor,
// continuing it, answering the steering.
func TestSDKSteerSuccessor(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	h := newHarness(t, runtime.Options{Models: map[string]runtime.Sampler{sdkModel: sampler.NewScripted(r, sampler.Timing{TPS: 100})}})
	ctx := sdkContext(t)
	conn := sdkConnect(t, ctx, sdkClient(t, h))
	if err := conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{Model: sdkModel, Input: textInput(longInput)}); err != nil {
		t.Fatalf("create: %v", err)
	}
	var seen []string
	var steered, successor string
	for {
		ev, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("recv after %v: %v", seen, sdkErrorDetail(err))
		}
		if fmt.Sprintf("%T", ev.AsAny()) == "<nil>" {
			t.Fatalf("event %s is no variant openai-go knows: %s", ev.Type, ev.RawJSON())
		}
		seen = append(seen, ev.Type)
		switch ev.Type {
		case "response.created":
			if steered == "" {
				steered = ev.AsResponseCreated().Response.ID
				steer := responses.ResponsesClientEventUnionParam{OfResponseSteer: &responses.ResponseSteerEventParam{
					PreviousResponseID: steered,
					Input:              responses.ResponseSteerInputUnionParam{OfString: param.NewOpt("Focus on the parser.")},
				}}
				if err := conn.Send(ctx, steer); err != nil {
					t.Fatalf("steer: %v", err)
				}
				continue
			}
			succ := ev.AsResponseCreated().Response
			successor = succ.ID
			if succ.PreviousResponseID != steered {
				t.Errorf("the successor continues %q, want %q", succ.PreviousResponseID, steered)
			}
		case "response.steer.accepted":
			if a := ev.AsResponseSteerAcceptedEvent(); a.Steer.PreviousResponseID != steered || !strings.HasPrefix(a.Steer.ID, "steer_") {
				t.Errorf("accepted %s", ev.RawJSON())
			}
		case "response.incomplete":
			if d := ev.AsResponseIncomplete().Response.IncompleteDetails; d.Reason != "steered" {
				t.Errorf("incomplete for %q, want steered", d.Reason)
			}
		case "response.completed":
			resp := ev.AsResponseCompleted().Response
			if resp.ID != successor || !strings.Contains(resp.OutputText(), "Focus on the parser.") {
				t.Fatalf("completed %s %q, want the successor %s answering the steering (events %v)", resp.ID, resp.OutputText(), successor, seen)
			}
			return
		case "response.failed", "error":
			t.Fatalf("%s", ev.RawJSON())
		}
	}
}
