package sampler

import (
	"context"
	"time"
)

// Backend is a model backend the Floored wrapper paces.
type Backend interface {
	Sample(ctx context.Context, req *Request, emit func(Delta)) (Result, error)
}

// Floored paces another backend (an upstream model) with the timing model,
// as a floor: each part start and token is passed on no earlier than the
// timing model makes it due, and a backend slower than the model is not
// delayed further. It lets a fast upstream stand for a model of a given
// speed, with its prefill counted by the same content-addressed prefix cache
// as the scripted models, so that every backend shares one timing model.
type Floored struct {
	next  Backend
	t     Timing
	cache *PrefixCache
}

// NewFloored wraps next with timing t.
func NewFloored(next Backend, r *Renderer, t Timing) *Floored {
	return &Floored{next: next, t: t, cache: NewPrefixCache(r, PrefixCacheOptions{})}
}

// Cache is the wrapper's prefix cache.
func (f *Floored) Cache() *PrefixCache { return f.cache }

// Sample runs the wrapped backend, holding back each delta until it is due.
// The backend's own prompt token counts win when it reports them.
func (f *Floored) Sample(ctx context.Context, req *Request, emit func(Delta)) (Result, error) {
	start := time.Now()
	prompt, cached := f.cache.Prefill(req)
	p := NewPacer(f.t, start, prompt-cached)
	defer p.Stop()
	i := 0
	var late error
	res, err := f.next.Sample(ctx, req, func(d Delta) {
		switch d.Kind {
		case TextStart, CallStart, TextDelta, ArgsDelta:
			if late == nil {
				late = p.Wait(ctx, i)
			}
		}
		if d.Kind == TextDelta || d.Kind == ArgsDelta {
			i++
		}
		emit(d)
	})
	if err == nil {
		err = late
	}
	if res.PromptTokens == 0 {
		res.PromptTokens, res.CachedPromptTokens = prompt, cached
	}
	res.PacerLate = p.Late()
	return res, err
}

// ContextWindow is the wrapped backend's context window, 0 when it has none
// known.
func (f *Floored) ContextWindow() int {
	if w, ok := f.next.(interface{ ContextWindow() int }); ok {
		return w.ContextWindow()
	}
	return 0
}

// CloseIdleConnections closes the wrapped backend's idle connections, if it
// keeps any (an Upstream does).
func (f *Floored) CloseIdleConnections() {
	if c, ok := f.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
