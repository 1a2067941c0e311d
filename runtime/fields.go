package runtime

import "github.com/tether-run/tether/protocol"

// This file is what a model must do for the request fields it honours,
// beyond sampling: a request for one it cannot honour is refused before
// anything starts, as OpenAI refuses a parameter a model does not take.

// CacheSampler is a Sampler that honours prompt_cache_retention: the
// simulated models keep their prefix cache by it, an upstream sends it to
// its server. A request that asks for a retention of any other is refused:
// nothing would keep its prefix as it asks.
type CacheSampler interface {
	CacheRetention() bool
}

// WindowSampler is a Sampler that knows its context window: the most tokens
// of prompt it reads, 0 when not known (an upstream model, unless its config
// says). The server truncates to it (truncation.go); truncation "auto" of a
// model whose window is not known is refused, as the server cannot tell
// what to leave out.
type WindowSampler interface {
	ContextWindow() int
}

// SimulatedEngineSampler is a Sampler that a simulated inference engine may
// pace (sampler.EngineModel): SimulatedEngine names it, "" when none does.
// /v1/models says so of the model.
type SimulatedEngineSampler interface {
	SimulatedEngine() string
}

// contextWindow is model's context window, 0 when not known.
func contextWindow(model Sampler) int {
	if wm, ok := model.(WindowSampler); ok {
		return wm.ContextWindow()
	}
	return 0
}

// honours refuses req when its model cannot honour one of its fields.
func honours(req *protocol.CreateRequest, model Sampler) *protocol.Error {
	if req.PromptCacheRetention != nil {
		if cm, ok := model.(CacheSampler); !ok || !cm.CacheRetention() {
			return protocol.Invalid(protocol.CodeUnsupportedParameter, "prompt_cache_retention",
				"Unsupported parameter: 'prompt_cache_retention' with the model '%s': it keeps no prompt cache, nor passes the field to a server that does.", req.Model)
		}
	}
	if req.Truncation == protocol.TruncationAuto && contextWindow(model) == 0 {
		return protocol.Invalid(protocol.CodeUnsupportedParameter, "truncation",
			"Unsupported parameter: 'truncation' 'auto' with the model '%s': its context window is not known to this server, which cannot tell what to leave out (tether serve: set context_window in the model's config).", req.Model)
	}
	return nil
}
