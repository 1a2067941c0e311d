package runtime

import (
	"net/http"

	"github.com/tether-run/tether/protocol"
)

// This file is what a suspended rollout's client is told when an event
// naming it is refused.

// errNoSuspended: no suspended rollout by that id reports to this
// connection (it never did, it ended, or another connection took it).
func errNoSuspended(id string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "response_id",
		"No suspended response '%s' on this connection.", id)
}

// errResumeNotFound: nothing to resume by that id under these credentials.
func errResumeNotFound(id string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "response_id",
		"No suspended response '%s' to resume under these credentials.", id)
}

// errResumeGone: the rollout a resume was admitted for ended, or its
// resume window passed, before the resume's turn came.
func errResumeGone(id string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "response_id",
		"No suspended response '%s' to resume: it ended, or its resume window passed.", id)
}

// errAppendNotParked: outputs for a rollout that is not waiting for them.
func errAppendNotParked(id string) *protocol.Error {
	return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
		"Response '%s' is not waiting for tool outputs: append only after response.done.", id)
}

// errForkNotParked: a fork of a rollout not parked on its client's calls.
func errForkNotParked(id string) *protocol.Error {
	return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
		"Response '%s' is not waiting for tool outputs: fork it after its response.done.", id)
}

// errForkAppended: a fork of a pause some of whose outputs are in.
func errForkAppended(id string) *protocol.Error {
	return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
		"Response '%s' has outputs of this pause appended already: fork it before appending any.", id)
}

// errForkTree: a fork of a multi-agent response whose root agent waits on
// its client's calls while sub-agents ran, which a fork does not take.
func errForkTree(id string) *protocol.Error {
	return protocol.Invalid(protocol.CodeUnsupportedParameter, "response_id",
		"Response '%s' has sub-agents and its root agent waits on your calls: a multi-agent response with sub-agents is forked while its root runs or waits on them. Answer the root's calls, then fork.", id)
}

// errForkHostedRunning: a fork of a pause whose step still runs a hosted
// tool.
func errForkHostedRunning(id, tool string) *protocol.Error {
	return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
		"Response '%s' is still running a hosted tool of its step (%s): fork it once the step waits on its client's calls alone.", id, tool)
}

// errNotSuspendedRollout: an append or a fork naming a cached-state
// response running on this connection.
func errNotSuspendedRollout(id string, fork bool) *protocol.Error {
	if fork {
		return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
			"Response '%s' is not a suspended rollout: fork a suspended response parked on its client's calls.", id)
	}
	return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
		"Response '%s' is not a suspended rollout: it takes no tool outputs by response.append (send them with response.create and previous_response_id).", id)
}

// errOutputTwice: an append whose output answers a call answered already.
func errOutputTwice(param, callID string) *protocol.Error {
	return protocol.Invalid(protocol.CodeDuplicateToolOutput, param+".call_id",
		"The tool call '%s' already has an output.", callID)
}

// errNoPendingCall: an append whose output answers no call of the pause.
func errNoPendingCall(param, callID, id string) *protocol.Error {
	return protocol.Invalid(protocol.CodeToolCallNotFound, param+".call_id",
		"No pending tool call with call_id '%s' in response '%s'.", callID, id)
}

// errSteerRole: an appended message that is not the user's.
func errSteerRole(param string, role protocol.Role) *protocol.Error {
	return protocol.Invalid(protocol.CodeInvalidValue, param+".role",
		"Only user messages may steer a suspended response, not '%s' messages.", role)
}

// errAppendItem: an appended item that is neither an output nor a message.
func errAppendItem(param string, typ protocol.ItemType) *protocol.Error {
	return protocol.Invalid(protocol.CodeInvalidValue, param+".type",
		"response.append takes tool outputs (function_call_output, custom_tool_call_output, shell_call_output, …) and user messages, not '%s'.", typ)
}

// errLaneSuspended: a create, or a fork, onto a lane whose rollout is
// parked on its client.
func errLaneSuspended(id string, fork bool) *protocol.Error {
	if fork {
		return protocol.Invalid(protocol.CodeStreamSuspended, "stream_id",
			"Response '%s' on this lane is suspended, waiting for tool outputs: fork onto a lane of its own.", id)
	}
	return protocol.Invalid(protocol.CodeStreamSuspended, "stream_id",
		"Response '%s' on this stream is suspended, waiting for tool outputs: send response.append, or response.cancel it, before creating another response on the stream.", id)
}

// errForkOwnStream: on WebTransport, a fork asked on the stream of the
// rollout it forks.
func errForkOwnStream(id string) *protocol.Error {
	return protocol.Invalid(protocol.CodeStreamSuspended, "response_id",
		"Response '%s' is this stream's: open another stream and send response.fork on it.", id)
}

// errOwnedElsewhere: a durable rollout another server has taken over, told
// to the client of the server it left, whose connection then closes
// with 1012: resumed, it reaches the rollout where it is.
func errOwnedElsewhere(id string) *protocol.Error {
	return protocol.Errorf(http.StatusConflict, protocol.CodeResponseOwnedElsewhere, "response_id",
		"Response '%s' has moved to another server, which serves it from now on: resume it there.", id)
}

// errLeasedElsewhere: a takeover refused while another server runs the
// rollout, or serves its client (its lease is live). Nothing of that
// server is told.
func errLeasedElsewhere(id string) *protocol.Error {
	return protocol.Errorf(http.StatusConflict, protocol.CodeResponseOwnedElsewhere, "response_id",
		"Response '%s' is running on another server, or its client is connected there: resume it there, or here again once that server lets it go.", id)
}

// errOtherLane: an event on another lane than the rollout's.
func errOtherLane(id, lane, got string) *protocol.Error {
	return protocol.Invalid(protocol.CodeStreamMismatch, "stream_id",
		"Response '%s' belongs to stream '%s', not '%s'.", id, lane, got)
}

// errResumeLane: a resume on another lane than the rollout's.
func errResumeLane(id, lane string) *protocol.Error {
	return protocol.Invalid(protocol.CodeStreamMismatch, "stream_id",
		"Response '%s' belongs to stream '%s': resume it with that stream_id.", id, lane)
}
