package lockrank

// order is runtime's lock order: one entry a rank, outer ranks first. A
// goroutine may take a lock only while every lock it holds is of a rank
// the lock's entry lists in after. A list holds every rank that may be
// held then, not just the nearest, as Go's lockPartialOrder does: a
// goroutine holding A, then B, takes C only if C lists both. A rank lists
// only ranks declared before it, so the order has no cycle
// (TestOrderIsAcyclicAndTransitive checks both).
//
// A leaf may be taken holding any lock but a leaf, and nothing is taken
// while one is held: it closes no cycle, so it needs no list.
//
// No rank lists itself: two locks of one rank (two sessions' mu) are never
// held at once, for nothing orders them.
//
// It is only read.
var order = [...]struct {
	name  string
	after ranks
	leaf  bool
}{
	rankSuspendedSet: {name: "suspendedSet.mu"},
	rankConnScope:    {name: "connScope.mu"},
	rankSession:      {name: "session.mu", after: ranks{rankConnScope}},
	rankRollout:      {name: "rollout.mu"},
	rankSuspension:   {name: "suspension.mu", after: ranks{rankSuspendedSet, rankConnScope, rankSession, rankRollout}},
	// A suspension writing its checkpoint asks, under its lock, whether the
	// server is closing ((*suspension).writeCheckpoint, (*Server).closing).
	rankServer: {name: "Server.mu", after: ranks{rankSuspendedSet, rankConnScope, rankSession, rankRollout, rankSuspension}},

	// A rollout's MCP server takes, gives back and evicts the connection's
	// pooled sessions under its own lock (mcpServer.session, broken, close).
	rankMCPServer: {name: "mcpServer.mu"},
	rankMCPConns:  {name: "mcpConns.mu", after: ranks{rankMCPServer}},

	// Taken holding none of these: a store's methods are called with no
	// lock held, for another store's may wait on the network (Redis); so
	// are the client secrets' and a WebSocket's Write (corkedConn).
	rankStore:         {name: "MemoryStore.mu"},
	rankConversations: {name: "MemoryConversations.mu"},
	rankCheckpoints:   {name: "MemoryCheckpoints.mu"},
	rankSecrets:       {name: "clientSecrets.mu"},
	rankCork:          {name: "corkedConn.mu"},
	// A server's background responses: their queue and who runs what.
	rankBackgrounds:     {name: "backgrounds.mu"},
	rankBackgroundStore: {name: "MemoryBackgrounds.mu"},

	rankOutbox:    {name: "outbox.mu", leaf: true},
	rankAdmission: {name: "admission.mu", leaf: true},
	rankStopper:   {name: "stopper.mu", leaf: true},
	rankInbox:     {name: "inbox.mu", leaf: true},
	rankRecorder:  {name: "record.Writer.mu", leaf: true},
	rankLeases:    {name: "leases.mu", leaf: true},
	rankWindows:   {name: "windowCache.mu", leaf: true},
	// A background response's event log, its rollout's sink: put under
	// the rollout's lock, read by the streams that follow it.
	rankBackgroundLog: {name: "backgroundLog.mu", leaf: true},
}

// rankID is a rank's index in order.
type rankID int

// ranks is a list of ranks, in order's entries.
type ranks []rankID

const (
	_ rankID = iota // no Rank has the zero rankID
	rankSuspendedSet
	rankConnScope
	rankSession
	rankRollout
	rankSuspension
	rankServer
	rankMCPServer
	rankMCPConns
	rankStore
	rankConversations
	rankCheckpoints
	rankSecrets
	rankCork
	rankBackgrounds
	rankBackgroundStore

	rankOutbox
	rankAdmission
	rankStopper
	rankInbox
	rankRecorder
	rankLeases
	rankWindows
	rankBackgroundLog
)

// Rank is the type parameter of a Mutex or RWMutex: one of the types below,
// each the rank of one lock of runtime's, held by every value of its type
// (every suspension's mu is a Mutex[Suspension]). Only this package
// declares them, so that every rank is in order.
type Rank interface{ id() rankID }

type (
	SuspendedSet    struct{} // suspendedSet.mu: a server's suspended rollouts and their tails
	ConnScope       struct{} // connScope.mu: what the lanes of one connection share
	Session         struct{} // session.mu: a connection's (or stream's) lanes
	Rollout         struct{} // rollout.mu: a response being sampled, shared with its tools
	Suspension      struct{} // suspension.mu: a suspended rollout's state
	Server          struct{} // Server.mu: what Shutdown drains
	MCPServer       struct{} // mcpServer.mu: a rollout's session with an MCP server
	MCPConns        struct{} // mcpConns.mu: a connection's MCP sessions and tool lists
	Store           struct{} // MemoryStore.mu (an RWMutex)
	Conversations   struct{} // MemoryConversations.mu
	Checkpoints     struct{} // MemoryCheckpoints.mu
	Secrets         struct{} // clientSecrets.mu: the client secrets redeemed
	Cork            struct{} // corkedConn.mu: a WebSocket's batched writes
	Outbox          struct{} // outbox.mu: a connection's frames for its writer
	Admission       struct{} // admission.mu: connections, responses in progress, rates
	Stopper         struct{} // stopper.mu: a rollout's cancel
	Inbox           struct{} // inbox.mu: the messages steered into a rollout
	Recorder        struct{} // record.Writer.mu: a traffic log
	Leases          struct{} // leases.mu: a server's lease releases waiting to be sent
	Windows         struct{} // windowCache.mu: the compaction windows a server opened lately
	Backgrounds     struct{} // backgrounds.mu: a server's background responses, queued and running
	BackgroundStore struct{} // MemoryBackgrounds.mu: background responses shared by servers in one process
	BackgroundLog   struct{} // backgroundLog.mu: a background response's events, as streamed
)

func (SuspendedSet) id() rankID    { return rankSuspendedSet }
func (ConnScope) id() rankID       { return rankConnScope }
func (Session) id() rankID         { return rankSession }
func (Rollout) id() rankID         { return rankRollout }
func (Suspension) id() rankID      { return rankSuspension }
func (Server) id() rankID          { return rankServer }
func (MCPServer) id() rankID       { return rankMCPServer }
func (MCPConns) id() rankID        { return rankMCPConns }
func (Store) id() rankID           { return rankStore }
func (Conversations) id() rankID   { return rankConversations }
func (Checkpoints) id() rankID     { return rankCheckpoints }
func (Secrets) id() rankID         { return rankSecrets }
func (Cork) id() rankID            { return rankCork }
func (Outbox) id() rankID          { return rankOutbox }
func (Admission) id() rankID       { return rankAdmission }
func (Stopper) id() rankID         { return rankStopper }
func (Inbox) id() rankID           { return rankInbox }
func (Recorder) id() rankID        { return rankRecorder }
func (Leases) id() rankID          { return rankLeases }
func (Windows) id() rankID         { return rankWindows }
func (Backgrounds) id() rankID     { return rankBackgrounds }
func (BackgroundStore) id() rankID { return rankBackgroundStore }
func (BackgroundLog) id() rankID   { return rankBackgroundLog }

// mayTake reports whether a lock of rank r may be taken while one of rank
// h is held.
func mayTake(h, r rankID) bool {
	if order[h].leaf {
		return false
	}
	if order[r].leaf {
		return true
	}
	for _, a := range order[r].after {
		if a == h {
			return true
		}
	}
	return false
}
