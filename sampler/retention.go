package sampler

// CacheRetention reports that the model keeps its prompts' prefixes as
// long as a request's prompt_cache_retention asks (see PrefixCache).
func (*Scripted) CacheRetention() bool { return true }

// CacheRetention reports that the model keeps its prompts' prefixes as
// long as a request's prompt_cache_retention asks (see PrefixCache).
func (*Replay) CacheRetention() bool { return true }

// CacheRetention reports that the upstream is sent a request's
// prompt_cache_retention: its server's cache keeps the prefix, or not, as
// that server does.
func (*Upstream) CacheRetention() bool { return true }

// CacheRetention reports that the wrapper's prefix cache, which paces the
// wrapped backend's prefill, keeps a request's prompt_cache_retention;
// the wrapped backend is given the request as it is.
func (*Floored) CacheRetention() bool { return true }
