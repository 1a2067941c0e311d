package sampler

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/tether-run/tether/protocol"
)

// This file is how each item of a context renders: as text the tokenizer
// reads, in blocks a chat template would make of it.

// writeItem writes one item's block and reports whether it has one (nil and
// unknown items have none).
func writeItem(b *renderBuf, it protocol.Item) bool {
	switch it := it.(type) {
	case *protocol.Message:
		if it == nil {
			return false
		}
		role := string(it.Role)
		if role == "" {
			role = string(protocol.RoleUser)
		}
		block(b, role)
		writeContents(b, it.Content)
	case *protocol.FunctionCall:
		if it == nil {
			return false
		}
		block(b, "assistant to="+qualified(it.Namespace, it.Name))
		b.WriteString(it.Arguments)
	case *protocol.CustomToolCall:
		if it == nil {
			return false
		}
		block(b, "assistant to="+qualified(it.Namespace, it.Name)+" custom")
		b.WriteString(it.Input)
	case *protocol.CustomToolCallOutput:
		if it == nil {
			return false
		}
		writeToolOutput(b, it.CallID, it.Output)
	case *protocol.FunctionCallOutput:
		if it == nil {
			return false
		}
		writeToolOutput(b, it.CallID, it.Output)
	case *protocol.Reasoning:
		if it == nil {
			return false
		}
		block(b, "assistant analysis")
		for i, c := range it.Summary {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(partText(c))
		}
	case *protocol.Compaction:
		if it == nil {
			return false
		}
		// The sealed bytes are opaque: only their size is visible.
		block(b, "system")
		b.WriteString("[compacted context: ")
		b.WriteString(strconv.Itoa(len(it.EncryptedContent)))
		b.WriteString(" bytes]")
	case *protocol.WebSearchCall:
		if it == nil {
			return false
		}
		block(b, "tool web_search")
		if it.Action != nil {
			b.WriteString("query: ")
			b.WriteString(it.Action.Query)
			for _, src := range it.Action.Sources {
				b.WriteString("\n- ")
				b.WriteString(src.Title)
				b.WriteString(" <")
				b.WriteString(src.URL)
				b.WriteString(">: ")
				b.WriteString(src.Snippet)
			}
		}
	case *protocol.ItemReferenceItem:
		if it == nil {
			return false
		}
		block(b, "system")
		b.WriteString("[ref ")
		b.WriteString(it.ID)
		b.WriteString("]")
	case *protocol.MCPListTools, *protocol.MCPCall, *protocol.MCPApprovalRequest, *protocol.MCPApprovalResponse:
		if !writeMCP(b, it) {
			return false
		}
	case *protocol.MultiAgentCall, *protocol.MultiAgentCallOutput, *protocol.AgentMessage:
		if !writeMultiAgent(b, it) {
			return false
		}
	case *protocol.Program, *protocol.ProgramOutput:
		if !writeProgram(b, it) {
			return false
		}
	case *protocol.ConfigurationUpdate:
		if it == nil {
			return false
		}
		// What it sets, as a system note: the model reads what its
		// settings became, as it reads the tools additional_tools adds.
		block(b, "system")
		b.WriteString("# Configuration update")
		writeSetting(b, "reasoning", it.Reasoning)
		writeSetting(b, "text", it.Text)
	default:
		if !writeTyped(b, it) {
			return false
		}
	}
	b.WriteString(imEnd)
	return true
}

// writeMCP writes an MCP item: a server's tool list as tool definitions,
// a call as the assistant's call and its result as the tool's answer, an
// approval round trip as what it asked and what the client said.
func writeMCP(b *renderBuf, it protocol.Item) bool {
	switch it := it.(type) {
	case *protocol.MCPListTools:
		if it == nil {
			return false
		}
		block(b, "system")
		b.WriteString("# Tools of MCP server " + it.ServerLabel)
		for _, t := range it.Tools {
			b.WriteString("\n" + it.ServerLabel + "." + t.Name)
			if t.Description != nil {
				b.WriteString(": " + *t.Description)
			}
			if len(t.InputSchema) > 0 {
				b.WriteString(" " + compactJSON(t.InputSchema))
			}
		}
		if it.Error != nil {
			b.WriteString("\nerror: " + *it.Error)
		}
	case *protocol.MCPCall:
		if it == nil {
			return false
		}
		block(b, "assistant to="+it.ServerLabel+"."+it.Name)
		b.WriteString(compactJSON([]byte(it.Arguments)))
		b.WriteString(imEnd)
		block(b, "tool "+it.ServerLabel+"."+it.Name)
		switch {
		case it.Output != nil:
			b.WriteString(*it.Output)
		case len(it.Error) > 0:
			b.WriteString("error: " + compactJSON(it.Error))
		}
	case *protocol.MCPApprovalRequest:
		if it == nil {
			return false
		}
		block(b, "assistant to="+it.ServerLabel+"."+it.Name+" approval")
		b.WriteString(compactJSON([]byte(it.Arguments)))
	case *protocol.MCPApprovalResponse:
		if it == nil {
			return false
		}
		block(b, "user approval")
		if it.Approve {
			b.WriteString("approved")
		} else {
			b.WriteString("denied")
		}
		if it.Reason != nil {
			b.WriteString(": " + *it.Reason)
		}
	}
	return true
}

// writeMultiAgent writes a multi-agent beta's item: an action an agent
// called as the assistant addressing the tree, its output as the tree's
// answer, and a message between agents as from its author to its
// recipient.
func writeMultiAgent(b *renderBuf, it protocol.Item) bool {
	switch it := it.(type) {
	case *protocol.MultiAgentCall:
		if it == nil {
			return false
		}
		block(b, "assistant to=multi_agent."+it.Action)
		b.WriteString(compactJSON([]byte(it.Arguments)))
	case *protocol.MultiAgentCallOutput:
		if it == nil {
			return false
		}
		block(b, "tool call_id="+it.CallID)
		writeContents(b, it.Output)
	case *protocol.AgentMessage:
		if it == nil {
			return false
		}
		block(b, "agent "+it.Author+" to="+it.Recipient)
		writeContents(b, it.Content)
	}
	return true
}

// writeProgram writes a program as the assistant addressing the hosted
// tool that runs it, with its code as written (JavaScript: not JSON to
// compact, and its line breaks are its own), and the program's output as
// that tool's answer. The fingerprint is opaque: never rendered.
func writeProgram(b *renderBuf, it protocol.Item) bool {
	switch it := it.(type) {
	case *protocol.Program:
		if it == nil {
			return false
		}
		block(b, "assistant to="+string(protocol.ToolProgrammatic))
		b.WriteString(it.Code)
	case *protocol.ProgramOutput:
		if it == nil {
			return false
		}
		block(b, "tool call_id="+it.CallID)
		b.WriteString(it.Result)
	}
	return true
}

// writeSetting writes a setting a configuration update holds, on a line of
// its own, unless the update leaves it alone.
func writeSetting(b *renderBuf, name string, raw json.RawMessage) {
	if v := bytes.TrimSpace(raw); len(v) == 0 || string(v) == "null" {
		return
	}
	b.WriteString("\n" + name + ": " + compactJSON(raw))
}

// writeToolOutput writes a function's or custom tool's output as the
// tool's answer.
func writeToolOutput(b *renderBuf, callID string, out protocol.ToolOutput) {
	// Most of an agent's context: grown once, not by doubling.
	b.Grow(len(imStart) + len("tool call_id=\n") + len(callID) + len(out.Text))
	block(b, "tool call_id="+callID)
	if out.Parts != nil {
		writeContents(b, out.Parts)
	} else {
		b.WriteString(out.Text)
	}
}

// writeTyped writes a typed call (shell, local_shell, apply_patch,
// computer, tool_search) as the assistant addressing the tool with its
// payload, and a typed output as the tool's answer; it reports false for
// anything else.
func writeTyped(b *renderBuf, it protocol.Item) bool {
	if c, ok := protocol.CallOf(it); ok {
		block(b, "assistant to="+c.Name)
		b.WriteString(compactJSON([]byte(c.Input)))
		return true
	}
	callID, _, ok := protocol.AnswerOf(it)
	if !ok {
		if t, ok := it.(*protocol.AdditionalTools); ok && t != nil {
			block(b, "system")
			b.WriteString("# Tools")
			for _, tool := range t.Tools {
				b.WriteByte('\n')
				writeTool(b, tool)
			}
			return true
		}
		return false
	}
	block(b, "tool call_id="+callID)
	switch it := it.(type) {
	case *protocol.ShellCallOutput:
		b.WriteString(compactJSON(it.Output))
	case *protocol.LocalShellCallOutput:
		b.WriteString(it.Output)
	case *protocol.ApplyPatchCallOutput:
		b.WriteString(string(it.Status))
		if it.Output != nil {
			b.WriteString(": " + *it.Output)
		}
	case *protocol.ComputerCallOutput:
		b.WriteString(imagePlaceholder)
	case *protocol.ToolSearchOutput:
		for i, tool := range it.Tools {
			if i > 0 {
				b.WriteByte('\n')
			}
			writeTool(b, tool)
		}
	}
	return true
}

func block(b *renderBuf, header string) {
	b.WriteString(imStart)
	b.WriteString(header)
	b.WriteByte('\n')
}

func writeContents(b *renderBuf, cs protocol.Contents) {
	for _, c := range cs {
		b.WriteString(partText(c))
	}
}

// partText is what the model sees of a content part: its text, or a
// fixed-cost placeholder for media and files.
func partText(c protocol.Content) string {
	switch c := c.(type) {
	case nil:
		return ""
	case *protocol.InputImage:
		return imagePlaceholder
	case *protocol.InputVideo:
		return videoPlaceholder
	case *protocol.InputFile:
		if c == nil || c.Filename == "" {
			return "[file]"
		}
		return "[file " + oneLine(c.Filename) + "]"
	default:
		return c.PlainText()
	}
}
