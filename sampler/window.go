package sampler

// DefaultContextWindow is the context window of the simulated models
// (Scripted, Replay) unless set: 4,194,304 tokens, past any OpenAI serves
// (gpt-4.1's 1,047,576), so that a simulated model refuses or truncates
// only what a real one never reads, and a window set to a real model's
// (tether serve: context_window in the config) is what makes truncation
// matter. As large as a PrefixCache of default bounds holds.
const DefaultContextWindow = 1 << 22

// window is a model's context window: the most tokens of prompt (the
// system block of instructions and tools, then the items) it reads, 0 when
// it is not known. The server checks a request's prompt against it
// (truncation); the simulated models read whatever they are sent.
type window struct{ tokens int }

// ContextWindow is the model's context window in tokens, 0 when not known.
func (w *window) ContextWindow() int { return w.tokens }

// SetContextWindow sets the model's context window to n tokens (n <= 0: not
// known). Call it before the model serves.
func (w *window) SetContextWindow(n int) { w.tokens = max(n, 0) }
