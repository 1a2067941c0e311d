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

// honours refuses req when its model cannot honour one of its fields.
func honours(req *protocol.CreateRequest, model Sampler) *protocol.Error {
	if req.PromptCacheRetention != nil {
		if cm, ok := model.(CacheSampler); !ok || !cm.CacheRetention() {
			return protocol.Invalid(protocol.CodeUnsupportedParameter, "prompt_cache_retention",
				"Unsupported parameter: 'prompt_cache_retention' with the model '%s': it keeps no prompt cache, nor passes the field to a server that does.", req.Model)
		}
	}
	return nil
}
