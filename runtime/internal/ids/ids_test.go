package ids

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// TestShapes: an id is its prefix, an underscore and 48 hex digits; an
// output's id is the same for the same response, kind and index, and
// differs when any of them does.
func TestShapes(t *testing.T) {
	shape := regexp.MustCompile(`^resp_[0-9a-f]{48}$`)
	if a, b := New("resp"), New("resp"); !shape.MatchString(a) || a == b {
		t.Fatalf("New: %q and %q, want two different resp_ ids of 48 hex digits", a, b)
	}
	a := Output("resp_1", "msg", 3)
	for _, other := range []string{Output("resp_2", "msg", 3), Output("resp_1", "fc", 3), Output("resp_1", "msg", 4)} {
		if other == a {
			t.Fatalf("Output gave %q for two different items", a)
		}
	}
	if Output("resp_1", "msg", 3) != a {
		t.Fatal("Output is not the same for the same item")
	}
}

// TestNameInputs: items without an id get one of their type's prefix;
// an item with an id, and an item_reference, keep theirs.
func TestNameInputs(t *testing.T) {
	named := &protocol.Message{ID: "msg_mine", Role: protocol.RoleUser}
	fresh := &protocol.FunctionCallOutput{CallID: "call_1"}
	ref := &protocol.ItemReferenceItem{ID: "msg_stored"}
	NameInputs(protocol.Items{named, fresh, ref})
	if named.ID != "msg_mine" || ref.ID != "msg_stored" {
		t.Fatalf("ids changed: %q, %q", named.ID, ref.ID)
	}
	if !regexp.MustCompile(`^fco_[0-9a-f]{48}$`).MatchString(fresh.ID) {
		t.Fatalf("a function_call_output was named %q, want fco_…", fresh.ID)
	}
}

func ExampleOutput() {
	// A step run again names its items as its first run did.
	fmt.Println(Output("resp_abc", "msg", 0) == Output("resp_abc", "msg", 0))
	// Output: true
}
