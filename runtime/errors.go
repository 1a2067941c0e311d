package runtime

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/outbox"
)

// ErrNotStored is returned by a Store for an id it does not hold.
var ErrNotStored = errors.New("runtime: response not stored")

// ErrItemNotStored is returned by a ConversationPager for an item id the
// conversation does not hold.
var ErrItemNotStored = errors.New("runtime: item not in the conversation")

// ErrTenantFull is returned by a ConversationStore that refuses an
// addition because the tenant's conversations already hold all it keeps
// of a tenant's (package redisstore's, past
// Options.MaxTenantConversationBytes): it keeps what it accepted until
// its TTL rather than evict another of them.
var ErrTenantFull = errors.New("runtime: the tenant's conversations are at the store's bound")

// ErrMCPNotAllowed is wrapped by an MCPClient's Check for a server a
// request may not reach (outside the allow-list, or a label the operator
// did not configure).
var ErrMCPNotAllowed = errors.New("runtime: MCP server not allowed")

// Why a session stops taking frames: its outbox's errors.
var (
	errSessionClosed = outbox.ErrClosed
	errSlowClient    = outbox.ErrSlowClient
)

// Causes of a rollout's end other than its own completion, given to
// rollout.abort. The first three are told to the client (cancelled; failed
// with client_tool_timeout or too_many_tool_calls); the others end a
// rollout nobody is attached to.
var (
	errCancelled        = errors.New("runtime: response cancelled by the client")
	errToolTimeout      = errors.New("runtime: client tool outputs did not arrive in time")
	errTooManyCalls     = errors.New("runtime: a step made more tool calls than Limits.MaxCallsPerStep")
	errResumeExpired    = errors.New("runtime: suspended response not resumed within the resume window")
	errDetachedFull     = errors.New("runtime: detached response produced more events than a resume can replay")
	errFenced           = errors.New("runtime: the rollout was taken over by another server")
	errHandedOver       = errors.New("runtime: the rollout was handed over for another server to resume")
	errHibernated       = errors.New("runtime: the rollout hibernated: its checkpoint holds it")
	errCheckpointBehind = errors.New("runtime: the rollout's checkpoint is older than what its client saw")
)

// errParked is what a suspended rollout's loop returns when it parks on
// its client's calls: its goroutine ends there, and the rollout waits as a
// value for its outputs (rollout.sleep, kick).
var errParked = errors.New("runtime: parked on the client's calls")

// errSettledTool is a restored step's hosted call run again, which restore
// never does: its result came with the pause.
var errSettledTool = errors.New("runtime: a settled call's tool was called again")

// errPauseUnreadable is a pause state this server does not read: another
// version of the form, or one whose parts do not fit together.
func errPauseUnreadable(version int) error {
	return fmt.Errorf("runtime: a suspended rollout's state (version %d) that this server cannot read (it reads version %d, whole)", version, pauseVersion)
}

// errChainTooLong ends a store load that never reaches the first response.
var errChainTooLong = errors.New("runtime: response chain too long or cyclic")

// StoreUnavailable is the error a Store returns when its backend did not
// answer (store_unavailable, 503): the client may retry.
func StoreUnavailable(cause error) *protocol.Error {
	return protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeStoreUnavailable, "",
		"The response store is unavailable (%v). Retry later; requests with store: false and no previous_response_id are served meanwhile.", cause)
}

// errShutdown is what a client whose response Shutdown cut is told.
func errShutdown() *protocol.Error {
	return protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeShuttingDown, "",
		"The server is shutting down: this response ended before it finished. Retry it on a server that is up.")
}
