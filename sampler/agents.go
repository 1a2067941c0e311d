package sampler

// Agents reports that the model acts on a multi-agent response's tree:
// its spawn, wait, send, list and interrupt directives are
// multi_agent_call items (docs/models.md).
func (*Scripted) Agents() bool { return true }

// Agents reports that the model runs in a multi-agent response: its
// recorded rollout is the root's, which spawns no sub-agent (a trace
// keeps no tree).
func (*Replay) Agents() bool { return true }

// Agents reports whether the wrapped backend acts on an agent tree.
func (f *Floored) Agents() bool {
	ab, ok := f.next.(interface{ Agents() bool })
	return ok && ab.Agents()
}
