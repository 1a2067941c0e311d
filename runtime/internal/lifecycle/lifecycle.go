package lifecycle

// Phase is where a suspended rollout is in its life.
type Phase uint8

const (
	Running    Phase = iota // sampling, running hosted tools, or ending
	Pausing                 // its loop waits on the step's client calls; the pause's response.done waits behind the step's held output_item.done events, or for its checkpoint
	Parked                  // response.done is out; waiting for the client's outputs
	Ended                   // its loop has returned; the result waits for a connection to settle it
	Settled                 // a connection took the result; gone from the server
	Expired                 // detached past the resume window; cancelled and gone
	Fenced                  // another server took it over from its checkpoint: it sends nothing more
	HandedOver              // released at shutdown, its checkpoint kept, to whichever server its client resumes on
	Hibernated              // released to its checkpoint while parked, to whichever server the next event naming it reaches
	numPhases
)

// NumPhases is how many phases there are, for a table over them.
const NumPhases = int(numPhases)

func (p Phase) String() string {
	return [...]string{"running", "pausing", "parked", "ended", "settled", "expired", "fenced", "handed-over", "hibernated"}[p]
}

// Released reports whether the rollout left this server for its
// checkpoint: it sends nothing more, and its loop, aborted, ends without
// dropping the checkpoint.
func (p Phase) Released() bool { return p >= Fenced }

// Held reports whether this server holds the rollout, its loop running or
// its result waiting: not gone, not released.
func (p Phase) Held() bool { return p <= Ended }

// linkState is how a suspended rollout stands to the connections: the one it
// reports to, if any, and whether that one is still catching up.
type linkState uint8

const (
	detached  linkState = iota // no connection: its frames go to the replay log, for the resume window
	live                       // its frames go to the connection it reports to
	replaying                  // a resuming connection catches up from the replay log; new frames wait there
	numLinks
)

func (l linkState) String() string { return [...]string{"detached", "live", "replaying"}[l] }

// State is a suspended rollout's whole state. The zero State is not one:
// New and Restored make them. Only Apply changes one.
type State struct {
	phase Phase
	link  linkState
	// checkpoints: the server writes its checkpoints (durable rollouts).
	checkpoints bool
	// holding: a write of its journal holds its frames back: a pause's
	// (its response.done waits for it), or its answer's (the step's
	// frames wait).
	holding hold
	// checkpointed: a checkpoint of it is in the store.
	checkpointed bool
	// durable: the pause it is parked at is that checkpoint.
	durable bool
	// appended: its client has appended items at the pause (outputs,
	// steering), not yet every output it waits for.
	appended bool
	// waking: woken by an event naming it, and the events queued for it
	// meanwhile not all taken yet.
	waking bool
	// announced: taken over at a pause whose response.done its client has
	// had: its first park announces nothing.
	announced bool
	// early: the multi-agent beta's waiting response, whose client
	// answers a call once it sees the call's output_item.done, which goes
	// out before the rollout parks on it: such an append waits for the
	// pause.
	early bool
}

// hold is what a write of the journal that holds the frames back is for.
type hold uint8

const (
	notHeld    hold = iota
	heldPause       // a pause's: its response.done, and what follows, wait
	heldAnswer      // an answer's: the step it starts runs, its frames wait
	numHolds
)

// New is the state of a suspended rollout that begins: running, reporting
// to the connection that created it. checkpoints says whether the server
// writes its checkpoints; early, that it waits in the multi-agent beta's
// dialect, where its client may answer a call before it parks.
func New(checkpoints, early bool) State {
	return State{phase: Running, link: live, checkpoints: checkpoints, early: early}
}

// Restored is the state of a rollout taken over from its checkpoint, about
// to run into the pause the checkpoint holds, which its client has seen
// announced: running, its checkpoint in the store. durable says the
// checkpoint's pause is still unanswered there; woken, that an event naming
// it woke it (its client saw the pause: nothing is replayed, and the events
// queued for it are yet to be taken), rather than a response.resume, whose
// connection catches up from the replay log; early, as New's.
func Restored(durable, woken, early bool) State {
	st := State{phase: Running, link: replaying, checkpoints: true, checkpointed: true, durable: durable, announced: true, early: early}
	if woken {
		st.link, st.waking = live, true
	}
	return st
}

// The state's parts, read.

func (s State) Phase() Phase       { return s.phase }
func (s State) Replaying() bool    { return s.link == replaying }
func (s State) Holding() bool      { return s.holding != notHeld }
func (s State) Checkpointed() bool { return s.checkpointed }
func (s State) Durable() bool      { return s.durable }
func (s State) Announced() bool    { return s.announced }

// Behind reports whether its frames wait in the replay log rather than go
// to a connection: detached, a resuming client catching up, or a write of
// its journal holding them back.
func (s State) Behind() bool { return s.link != live || s.holding != notHeld }

// Leased reports whether the server must hold the rollout's lease in the
// store of checkpoints, so that no other server takes it over: it has a
// journal there, this server runs it, and it is not parked with nobody
// following it. A rollout parked while detached holds none: its client
// may resume it on any server at once. (Its first write leases it as it
// lands.)
func (s State) Leased() bool {
	return s.checkpointed && (s.phase < Parked || s.phase == Parked && s.link != detached)
}

// MayHibernate reports whether a hibernation timer is worth arming: parked
// at its checkpoint, no wake's events being taken. Whether it then
// hibernates is Hibernate's rule, when the timer fires.
func (s State) MayHibernate() bool {
	return s.phase == Parked && s.durable && !s.waking
}
