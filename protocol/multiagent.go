package protocol

import (
	"encoding/json"
	"slices"

	"github.com/go-json-experiment/json/jsontext"
)

// The items of OpenAI's Responses multi-agent beta (openai-go's
// BetaResponseOutputItemMultiAgentCall, …CallOutput and …AgentMessage): a
// response's agents are paths, /root and /root/<task_name>; an agent asks
// the server to act on the tree with a multi_agent_call, which the server
// runs (a client never does) and answers with a multi_agent_call_output;
// agents tell each other things with agent_message items. Every item an
// agent makes names it (Agent); sent back as input, id and agent may be
// left out.

// Multi-agent item types.
const (
	ItemMultiAgentCall       ItemType = "multi_agent_call"
	ItemMultiAgentCallOutput ItemType = "multi_agent_call_output"
	ItemAgentMessage         ItemType = "agent_message"
)

// The actions of a multi_agent_call.
const (
	ActionSpawnAgent     = "spawn_agent"     // arguments {task_name, message, fork_turns}
	ActionWaitAgent      = "wait_agent"      // the caller waits until the named agents end
	ActionSendMessage    = "send_message"    // a message to a running or finished agent
	ActionFollowupTask   = "followup_task"   // a new task for a finished agent
	ActionListAgents     = "list_agents"     // the tree
	ActionInterruptAgent = "interrupt_agent" // cancels one agent
)

// MultiAgentActions lists the actions, in the order OpenAI's reference
// gives them.
var MultiAgentActions = []string{ActionSpawnAgent, ActionInterruptAgent, ActionListAgents, ActionSendMessage, ActionFollowupTask, ActionWaitAgent}

// RootAgent is the name of a multi-agent response's root agent.
const RootAgent = "/root"

// AgentRef names the agent that made an item or an event.
type AgentRef struct {
	AgentName string `json:"agent_name"`
}

// AgentOf is the agent an item names, nil when none (the root's, or an
// item sent back without it).
func AgentOf(it Item) *AgentRef {
	switch it := it.(type) {
	case *Message:
		return it.Agent
	case *FunctionCall:
		return it.Agent
	case *CustomToolCall:
		return it.Agent
	case *MultiAgentCall:
		return it.Agent
	case *MultiAgentCallOutput:
		return it.Agent
	case *AgentMessage:
		return it.Agent
	case *ShellCall:
		return it.Agent
	case *LocalShellCall:
		return it.Agent
	case *ApplyPatchCall:
		return it.Agent
	case *ComputerCall:
		return it.Agent
	case *ToolSearchCall:
		return it.Agent
	case *WebSearchCall:
		return it.Agent
	case *MCPCall:
		return it.Agent
	case *MCPApprovalRequest:
		return it.Agent
	case *Reasoning:
		return it.Agent
	}
	return nil
}

// MultiAgentCall is an agent's call of a multi-agent action, which the
// server runs.
type MultiAgentCall struct {
	ID        string    `json:"id,omitempty"`
	CallID    string    `json:"call_id"`
	Action    string    `json:"action"`
	Arguments string    `json:"arguments"`
	Agent     *AgentRef `json:"agent,omitempty"`
}

// MultiAgentCallOutput is what a multi-agent action gave back, as text.
type MultiAgentCallOutput struct {
	ID     string    `json:"id,omitempty"`
	CallID string    `json:"call_id"`
	Action string    `json:"action"`
	Output Contents  `json:"output"` // output_text parts
	Agent  *AgentRef `json:"agent,omitempty"`
}

// AgentMessage is a message from one agent to another: a sub-agent's
// final answer to the agent waiting on it, or a send_message's text.
type AgentMessage struct {
	ID        string    `json:"id,omitempty"`
	Author    string    `json:"author"`
	Recipient string    `json:"recipient"`
	Content   Contents  `json:"content"`
	Agent     *AgentRef `json:"agent,omitempty"`
}

func (*MultiAgentCall) ItemType() ItemType       { return ItemMultiAgentCall }
func (*MultiAgentCallOutput) ItemType() ItemType { return ItemMultiAgentCallOutput }
func (*AgentMessage) ItemType() ItemType         { return ItemAgentMessage }

func (i *MultiAgentCall) ItemID() string       { return i.ID }
func (i *MultiAgentCallOutput) ItemID() string { return i.ID }
func (i *AgentMessage) ItemID() string         { return i.ID }

type (
	wireMultiAgentCall       MultiAgentCall
	wireMultiAgentCallOutput MultiAgentCallOutput
	wireAgentMessage         AgentMessage
)

func (i *MultiAgentCall) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemMultiAgentCall), (*wireMultiAgentCall)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *MultiAgentCall) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *MultiAgentCallOutput) MarshalJSONTo(enc *jsontext.Encoder) error {
	w := *i
	if w.Output == nil {
		w.Output = Contents{}
	}
	return typedTo(enc, string(ItemMultiAgentCallOutput), (*wireMultiAgentCallOutput)(&w))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *MultiAgentCallOutput) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *AgentMessage) MarshalJSONTo(enc *jsontext.Encoder) error {
	w := *i
	if w.Content == nil {
		w.Content = Contents{}
	}
	return typedTo(enc, string(ItemAgentMessage), (*wireAgentMessage)(&w))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *AgentMessage) MarshalJSON() ([]byte, error) { return Marshal(i) }

// decodeMultiAgent decodes the multi-agent items; ok is false for any
// other type. Their texts are output_text parts (an agent's message may
// hold input_text too, as a user's task does).
func decodeMultiAgent(raw json.RawMessage, typ ItemType, param string) (Item, *Error, bool) {
	var it Item
	var perr *Error
	switch typ {
	case ItemMultiAgentCall:
		v := new(MultiAgentCall)
		if err := unmarshal(raw, (*wireMultiAgentCall)(v)); err != nil {
			return nil, Invalid(CodeInvalidType, param, "Invalid %s item: %s.", typ, jsonReason(err)), true
		}
		it = v
	case ItemMultiAgentCallOutput:
		var w struct {
			ID     string          `json:"id"`
			CallID string          `json:"call_id"`
			Action string          `json:"action"`
			Output json.RawMessage `json:"output"`
			Agent  *AgentRef       `json:"agent"`
		}
		if err := unmarshal(raw, &w); err != nil {
			return nil, Invalid(CodeInvalidType, param, "Invalid %s item: %s.", typ, jsonReason(err)), true
		}
		v := &MultiAgentCallOutput{ID: w.ID, CallID: w.CallID, Action: w.Action, Agent: w.Agent}
		if !isNull(w.Output) {
			if v.Output, perr = decodeContents(w.Output, param+".output", outputText); perr != nil {
				return nil, perr, true
			}
		}
		it = v
	case ItemAgentMessage:
		var w struct {
			ID        string          `json:"id"`
			Author    string          `json:"author"`
			Recipient string          `json:"recipient"`
			Content   json.RawMessage `json:"content"`
			Agent     *AgentRef       `json:"agent"`
		}
		if err := unmarshal(raw, &w); err != nil {
			return nil, Invalid(CodeInvalidType, param, "Invalid %s item: %s.", typ, jsonReason(err)), true
		}
		v := &AgentMessage{ID: w.ID, Author: w.Author, Recipient: w.Recipient, Agent: w.Agent}
		if !isNull(w.Content) {
			if v.Content, perr = decodeContents(w.Content, param+".content", outputText); perr != nil {
				return nil, perr, true
			}
		}
		it = v
	default:
		return nil, nil, false
	}
	return it, validateMultiAgent(it, param), true
}

// outputText is a string where content parts go, as an agent's text is.
func outputText(s string) Content { return &OutputText{Text: s, Annotations: []Annotation{}} }

// validateMultiAgent checks the fields a multi-agent item must have.
func validateMultiAgent(it Item, p string) *Error {
	need := func(ok bool, field string) *Error {
		if ok {
			return nil
		}
		return Invalid(CodeMissingRequired, p+"."+field, "Missing required parameter: '%s.%s'.", p, field)
	}
	action := func(a string) *Error {
		if perr := need(a != "", "action"); perr != nil || slices.Contains(MultiAgentActions, a) {
			return perr
		}
		return Invalid(CodeInvalidValue, p+".action", "Invalid '%s.action': '%s'. Supported values are: 'spawn_agent', 'interrupt_agent', 'list_agents', 'send_message', 'followup_task' and 'wait_agent'.", p, a)
	}
	switch it := it.(type) {
	case *MultiAgentCall:
		if perr := validateCallID(it.CallID, p+".call_id"); perr != nil {
			return perr
		}
		return action(it.Action)
	case *MultiAgentCallOutput:
		if perr := validateCallID(it.CallID, p+".call_id"); perr != nil {
			return perr
		}
		return action(it.Action)
	case *AgentMessage:
		if perr := need(it.Author != "", "author"); perr != nil {
			return perr
		}
		return need(it.Recipient != "", "recipient")
	}
	return nil
}
