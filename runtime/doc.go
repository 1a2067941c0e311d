// Package runtime is tether's engine: the rollout (one response's sampling
// loop), the session (one connection's lanes and their queues: a
// WebSocket's, or one WebTransport stream, a lane of its own), its scope
// (the limits and connection-local cache the lanes of one connection
// share), the transports (WebSocket, HTTP/SSE on /v1/responses, Chat
// Completions) and the memory store.
//
// An embedder uses a Server (an http.Handler), its Options, and the
// interfaces it plugs in: Sampler (model backends, from package sampler),
// Tool (hosted tools, from the packages under hostedtools), MCPClient
// (hostedtools/mcp) and Store.
//
// A transport whose connections carry their lanes as connections of their
// own plugs into the frame transport seam (see its heading below).
// WebTransport over HTTP/3 is such a transport, package runtime/webtransport,
// which runtime does not import.
//
// The data flow of one turn, whatever the transport:
//
//	frame -> protocol.Decode -> lane (FIFO) -> resolve model -> resolve parent
//	      (connection cache | store | a Conversations API conversation's
//	      items) -> validate and render new input only
//	      -> loop { before the step: list MCP servers' tools (first step),
//	                run the MCP calls the client approved
//	                Sampler.Sample -> events -> sink -> writer
//	                dispatch the step's calls: the hosted ones' Tool.Call
//	                (errgroup), the client's to the rollout's clientCalls }
//	      -> terminal response -> cache (+ store) (+ the conversation's items)
//
// A session has one dispatcher of client events (session.handle). What
// cannot be taken at once waits on its lane, in one queue that records why
// (lane.held): a job for its turn on the lane's worker (forTurn), an event
// behind an append whose item references resolve (forResolve), an event
// for a rollout that wakes on the lane (forWake).
//
// Both of OpenAI's designs are that one loop; the loop does not know which
// it runs. Calls that no hosted tool takes are the client's, and go to the
// rollout's clientCalls, the one seam between the loop and the design. In
// cached-state turns (and over HTTP) it leaves them open (openCalls): the
// response ends and its state stays in the connection cache for the next
// response.create with previous_response_id. In a suspended rollout
// (suspend: true) it is the rollout's suspension, which has the pause
// announced with response.done and returns the outputs response.append
// delivers; until they are in, the loop returns errParked and its goroutine
// ends: a parked loop is a value (the rollout, its step in
// rollout.parked), and the append that brings the last output, or whatever
// ends the rollout meanwhile, drives it on from there on a goroutine of its
// own (rollout.kick). The lane that follows it holds no goroutine either:
// its job ends when the rollout ends or leaves (session.follow, then
// followed), so a parked rollout on an open connection costs that
// connection's read loop alone. The whole rollout is one response, which
// outlives its connection for the resume window. Over HTTP the state comes from the
// request or the store. The multi-agent beta's waiting response (a
// create with multi_agent over WebSocket) is a suspended rollout in
// OpenAI's dialect: the pause is announced by nothing (the response stays
// in_progress; suspension.wait parks it as a response.done would), and
// its client's answers may come before it (suspension_early.go). Its
// agents are loops too (agents.go): each sub-agent that spawn_agent
// starts is a rollout that is not a response, sharing its response's
// lock, output and event stream; its client calls park it as the root's
// do (agentCalls), an append or inject routes each output to the agent
// waiting on its call_id, and the agents' actions are a hosted tool
// (agentTool). Over HTTP the tree is open: every agent leaves its client
// calls open, the response completes when they all have ended or wait,
// and the next request builds the tree again from its items
// (agents_http.go); a durable server journals a waiting tree's items at
// each rest, and a takeover builds it again from them (agents_durable.go).
//
// # A suspended rollout's life
//
// A suspension owns a suspended rollout's state, one lifecycle.State
// (package runtime/internal/lifecycle): its phase, the connection it
// reports to, where its checkpoint stands. Every event, its client's, its
// loop's, its timers', its store's and the server's, is submitted to that
// state (suspension.applyLocked), which lifecycle.Decide judges, sender
// and all, and which nothing else writes; the refusals a client reads are
// built in one place from its verdicts (suspension.refusal). Its phase is
// one of running, pausing, parked, ended, settled, expired, or released to
// its checkpoint (fenced, handed over, hibernated: it sends nothing more);
// it is attached to a connection (live, or replaying: a resuming connection
// catching up from the replay log, while new frames wait in the log) or
// detached:
//
//	         the loop asks its clientCalls      the pause's response.done goes
//	         for the step's client calls        out (after the step's held
//	running ---------------------------> pausing  output_item.done events,
//	   ^  ^                                 |     and its checkpoint) -----> parked
//	   |  +---- cancel, shutdown -----------+                                  |
//	   +---- the last pending call gets its output (response.append) ---------+
//	   +---- cancel, Suspension.Timeout, shutdown: aborted, runs to its end ---+
//	   |
//	   v  the loop returns (terminal frame held)
//	 ended --- its connection takes the result ---> settled
//
//	running, pausing, parked, ended --- another server took it over ---> fenced
//	pausing, parked at its checkpoint --- shutdown ---> handed over
//	parked at its checkpoint --- Suspension.HibernateAfter ---> hibernated
//
//	attached --- connection drops ---> detached --- SuspensionOptions.ResumeWindow ---> expired
//	attached <-- response.resume -----  detached
//	attached --- response.resume from another connection (takeover) ---> attached there
//
// What each of its client's events does, by phase (every other combination
// is refused with the code shown, and the connection stays usable;
// lifecycle's tests check every event in every state value, and
// TestSuspensionRules the codes):
//
//   - response.append, from the attached connection on the rollout's lane:
//     parked: delivers (the rollout is running again the moment the last
//     pending call has its output; when the step's hosted calls have all
//     returned, that append sends the response.in_progress itself, under
//     the rollout's lock: suspension.deliver); running or pausing:
//     response_not_suspended, but in the multi-agent beta's dialect, whose
//     client answers a call as soon as it sees it, the append waits and
//     is taken as the rollout parks (suspension_early.go); ended, settled,
//     expired, other connection:
//     response_not_found; other lane: stream_id_mismatch; fenced or handed
//     over: nothing (another server answers it); hibernated: wakes it.
//     response.inject (the multi-agent beta's name, inject.go) is taken
//     the same way, acknowledged in the response's sequence, before the
//     step it resumes (response.inject.created), or refused with
//     response.inject.failed, its input given back.
//   - response.steer, from the attached connection (it names no lane):
//     running or pausing: its input waits in the rollout's inbox for the
//     step's end (steer.go); parked: the same, and pending is told at once
//     (a durable rollout's pause refuses it: steering_not_supported);
//     ended, settled, expired: response_already_completed; released:
//     response_not_active; other connection: response_not_found.
//   - response.create on the lane: refused with stream_suspended while
//     parked on this connection; otherwise it queues behind the rollout
//     (FIFO).
//   - response.cancel: running, pausing or parked: the rollout ends
//     cancelled; hibernated: wakes it, to be cancelled.
//   - response.fork, from the attached connection on the rollout's lane:
//     parked, nothing of the pause appended and no hosted call of the step
//     still running: the state at the pause is taken (fork.go) and each lane
//     named gets, in its turn, a new suspended rollout parked on the same
//     calls; otherwise response_not_suspended.
//   - response.resume, same credentials, from a connection it is not
//     attached to: running, pausing, parked or ended: attaches, replays
//     what the client missed (the pending response.done again when parked),
//     and the lane follows it; released: taken over from its checkpoint;
//     settled: its tail (tail.go) is read back, for the resume window, in
//     case the connection that settled it was dying; expired:
//     response_not_found.
//   - connection drops: attached becomes detached and the resume window
//     starts (not once settled, expired or released, nor at shutdown); its
//     frames go to the replay log meanwhile.
//   - Suspension.Timeout, while parked: the rollout fails (client_tool_timeout).
//   - the loop returns: ended; the connection it is attached to settles it
//     (caches its conversation, sends its terminal frame). Ended while
//     detached, it waits for a resume, or expires.
//   - Shutdown: after the drain (shutdown.go), running, pausing or parked,
//     the rollout fails with server_shutting_down, told to the connection
//     it is attached to; it takes no more outputs (an append is refused with
//     response_not_suspended, a resume replays no pause); no window starts.
//
// # Durable rollouts
//
// With Options.Checkpoints (suspension_durable.go), a suspended rollout outlives its
// server. It keeps a journal in the store (journal.go): a snapshot of its
// state at its first pause (pause.go's pauseState, and its prompt's
// tokens), then what each pause adds (a step entry: new items, new output,
// the loop's small state) and each answer (the items appended), every
// entry with the frames since its client last appended. A pause's
// response.done waits in the replay log until its entry is written (its
// state is holding); an answer's step runs while its entry is written,
// its frames waiting. A goroutine of its own writes each, so the
// rollout's producer never waits on the store. The rollout owns its
// journal by an epoch (1 where it began); a response.resume on a server
// that does not hold the rollout loads the journal under the connection's
// tenant and credentials, raises the epoch (a compare-and-swap), rebuilds
// the loop parked at the last pause under its own id, without announcing
// the pause again (the first park of a rollout taken over is silent:
// suspension.parkSilently), and replays what the client missed; not while
// another server's lease on it is live (lease.go: a server leases the
// rollouts it runs, or whose client it serves, and renews them together).
// The server that held it finds out at its next renewal, its next write,
// or its pause's timeout, and stops it without a frame more of it, telling
// a client still attached (response_owned_elsewhere, then a close 1012). A
// rollout that ends drops its journal, leaving its epoch, so a fenced
// server cannot write it again.
//
// Parked at a checkpointed pause past Suspension.HibernateAfter, a
// rollout hibernates (suspension_wake.go, session_wake.go): its loop ends as at a handover (nothing
// sent, the checkpoint kept), the suspended set keeps its id (asleep, for
// the quotas), and the lane it reported on keeps its place (its occupant, asleep)
// until the pause's timeout. An append or a cancel naming a rollout the
// server does not hold, or holds asleep, wakes it: a takeover, as a
// resume's, with nothing replayed; the events naming it meanwhile wait on
// its lane (forWake) and are taken in order as it parks.
//
// # Locks
//
// No lock is held across anything that waits on a client: events are
// encoded under locks and queued without blocking (outbox.Outbox.Put). A rollout
// never waits for its client at all: while its frames wait for the writer,
// it merges its text and argument deltas instead (rollout.emitDelta), and a
// client that falls further behind than Timeouts.SlowClient is cut
// (session.tooSlow). Only a resume's replay waits for room, with no lock
// held. A WebSocket is written by the server's
// flushers (package flushers: a few goroutines for every connection, one a
// P, rather than one a connection each time frames come, which kept the Ps
// too busy to poll the network for the readers), and a flusher waits on no
// client: it writes what the socket takes at once, and a connection whose
// socket does not take a batch whole goes on with a writer of its own.
// Over TLS, a flusher seals the batch into records in memory and writes
// those (TLSListener, under the server's TLS listener). Such a
// writer (and every connection's over WebTransport, or over a TLS
// listener of the caller's own) waits
// only while the server is saturated, and with no lock held: it holds a
// write for at most a millisecond, to take the connection's next frames
// with it (Outbox.More, by the policy of package internal/flushhold;
// Server.FlushHolds counts the holds). The read loop takes only such
// locks, so it never waits on a rollout. Lock order, outer first:
//
//	suspendedSet.mu -> suspension.mu
//	connScope.mu -> session.mu -> suspension.mu
//	rollout.mu -> suspension.mu -> outbox.mu
//	suspension.mu -> Server.mu
//	mcpServer.mu -> mcpConns.mu
//
// Leaves, taken under any of these: outbox.mu, admission.mu, the rollout's
// stopper and inbox locks, a Recorder's own (runtime/record's Writer.mu).
// Server.mu, which guards what Shutdown drains (sessions, running
// rollouts), holds only leaves; a suspension writing its checkpoint asks,
// under its own lock, whether the server is closing. The memory stores'
// locks, the client secrets' and a WebSocket connection's (corkedConn) are
// taken holding none; under a connection's, only its TLS connection's and
// its sealed records' (package flushers) are. The memory budget (package runtime/internal/budget) is one atomic, no
// lock. The server's state has one lock per concern: admission
// (connections, responses in progress, request rates), the suspended set
// (suspended rollouts and their tails), the store's own, and Server.mu.
//
// The order is checked: every mutex of runtime's is a lockrank.Mutex (or
// RWMutex) of its rank, and under go test -race a lock taken out of the
// order in lockrank's table (package runtime/internal/lockrank, order)
// ends the process, naming it and the lock held. An order new to the code
// goes in that table, and here.
//
// # Optional layers
//
// The core imports little; what not every server needs plugs into seams it
// declares, each in a package of its own that imports runtime. These names
// exist for those packages (and the command that wires them in); an
// embedder that uses the defaults needs none of them:
//
//   - Stores: [Store] (with [ChainStore], [ItemStore] and [OnceStore] when
//     the store can do more), [Record], [ConversationStore] (with
//     [ConversationPager] when it reads an [ItemPage] alone), [Checkpoints]
//     and [Checkpoint]; their errors [ErrNotStored], [ErrItemNotStored],
//     [ErrTooLarge], [ErrTenantFull], [ErrFenced] and [StoreUnavailable];
//     the tenant a call is for, [Tenant] and [WithTenant].
//     runtime/redisstore is Redis, shared by many servers; [MemoryStore],
//     [MemoryConversations] and [MemoryCheckpoints] are the defaults.
//   - Hosted tools: [Tool], [MCPClient] and [MCPSession] ([ErrMCPNotAllowed]):
//     hostedtools/websearch, hostedtools/mcp.
//   - [Hooks]: runtime/cost, the work a production API does around
//     inference (a lexical safety classifier over new text, simulated
//     service calls before and after it), which an ablation turns on to
//     measure what it costs in each design.
//   - [Recorder]: runtime/record, the traffic log `serve --record` keeps of
//     every response's request, events and appends.
//   - [Observer]: runtime/prommetrics, which exports to Prometheus what the
//     server measures. Every phase of a response is timed into
//     protocol.Timings (sent when a request includes
//     protocol.IncludeTimings) and given to the Observer with the way the
//     response was served ([ServePath]: transport, design and where its
//     state came from); the writers time each frame from the moment it was
//     queued to the end of its write.
//
// # The frame transport seam
//
// A transport whose connections carry many lanes, each a connection of its
// own (runtime/webtransport: a WebTransport connection's streams), serves
// them through these names, which exist for it: [Server.Authenticate] and
// [Server.OpenConnection] admit a client connection as a [Connection];
// [Connection.ServeLane] serves each lane, a [FrameConn], until it ends
// ([CloseStatus]); a lane's large frame asks [Connection.HoldFrame] first,
// and one refused is read past as [FrameRefused]. [ErrorFrame] and
// [WriteError] are a refusal on a lane and over HTTP; [Server.Options] and
// [Server.Logger], what a transport sizes itself by and logs to. The
// core's WebSocket is a FrameConn too: one connection, whose lanes
// stream_id names.
//
// Handle mounts an embedder's handlers (/metrics, /debug/pprof/) behind the
// server's keys. Importing runtime starts no goroutine and registers
// nothing on a global.
//
// A Server is an http.Handler. Sessions and suspended rollouts are tracked so
// that Shutdown can drain them, which http.Server.Shutdown does not do for
// hijacked connections.
package runtime
