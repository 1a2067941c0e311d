// Package ids names what a server makes: responses, their output items,
// and the input items a client sent without an id, in the shape of
// OpenAI's ids (resp_, msg_, fc_, cmp_).
package ids

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/tether-run/tether/protocol"
)

// New returns prefix_ followed by 48 random hex digits, the shape of
// OpenAI's ids (resp_, msg_, fc_, cmp_).
func New(prefix string) string {
	var b [24]byte
	rand.Read(b[:])
	out := make([]byte, len(prefix)+1+48)
	copy(out, prefix)
	out[len(prefix)] = '_'
	hex.Encode(out[len(prefix)+1:], b[:])
	return string(out)
}

// Output is the id of the response's output item at index, of the kind
// prefix names: drawn from the response's id, so that a step run again
// (a rollout taken over from its checkpoint mid-step) names its items as
// the first run did, and as unguessable as the response id.
func Output(respID, prefix string, index int) string {
	sum := sha256.Sum256([]byte(respID + "/" + prefix + "/" + strconv.Itoa(index)))
	out := make([]byte, len(prefix)+1+48)
	copy(out, prefix)
	out[len(prefix)] = '_'
	hex.Encode(out[len(prefix)+1:], sum[:24])
	return string(out)
}

// NameInputs gives the input items a client sent without an id one, as
// OpenAI does (msg_, fco_, ctco_…), so that input_items and a
// conversation's items list every item with one and page past it with
// after. An item_reference's id is the item it names: never changed.
func NameInputs(items protocol.Items) {
	for _, it := range items {
		if it.ItemID() != "" || it.ItemType() == protocol.ItemReference {
			continue
		}
		prefix, ok := inputIDPrefix[it.ItemType()]
		if !ok {
			prefix = "item"
		}
		protocol.SetItemID(it, New(prefix))
	}
}

// inputIDPrefix is the prefix of a client's item's id, by type.
var inputIDPrefix = map[protocol.ItemType]string{
	protocol.ItemMessage:              "msg",
	protocol.ItemFunctionCall:         "fc",
	protocol.ItemFunctionCallOutput:   "fco",
	protocol.ItemCustomToolCall:       "ctc",
	protocol.ItemCustomToolCallOutput: "ctco",
	protocol.ItemReasoning:            "rs",
	protocol.ItemCompaction:           "cmp",
	protocol.ItemShellCallOutput:      "sho",
	protocol.ItemLocalShellCallOutput: "lsho",
	protocol.ItemApplyPatchCallOutput: "apco",
	protocol.ItemComputerCallOutput:   "cuo",
	protocol.ItemToolSearchOutput:     "tso",
	protocol.ItemMCPApprovalResponse:  "mcpr",
}
