package runtime

import (
	"context"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// This file is a rollout's sampling step: the request its model is asked,
// and what the step's result adds to the response's usage.

// sampleStep samples one model step, streaming its items.
func (r *rollout) sampleStep(ctx context.Context) (sampler.Result, error) {
	if perr := r.fit(); perr != nil {
		return sampler.Result{}, perr
	}
	items, prompt := r.read()
	r.calls = r.calls[:0]
	r.steps++
	t0 := r.srv.now()
	r.first = false
	res, err := r.model.Sample(ctx, &sampler.Request{
		Model:           r.req.Model,
		Instructions:    derefString(r.req.Instructions),
		Logprobs:        r.logprobs,
		TopLogprobs:     r.topLogprobs,
		Items:           items,
		Tools:           r.offered(),
		ToolChoice:      r.resp.ToolChoice,
		Serial:          !r.resp.ParallelToolCalls,
		MaxOutputTokens: derefInt(r.req.MaxOutputTokens) - r.usage.OutputTokens,
		Format:          textFormat(r.req.Text),
		Prompt:          prompt,
		CacheKey:        derefString(r.req.PromptCacheKey),
		CacheRetention:  derefString(r.req.PromptCacheRetention),
		ServiceTier:     r.req.ServiceTier,
		Session:         r.session(),
		Response:        r.resp.ID,
		MultiAgent:      r.req.MultiAgentEnabled(),
		Agent:           r.agentName(),
		Suspended:       r.path.Design == designSuspend,
		Start:           r.modelReady,
	}, r.onDelta)
	if len(r.together) > 0 { // the sample ended between tokens released together
		kind := sampler.TextDelta
		if r.openCall != nil {
			kind = sampler.ArgsDelta
		}
		r.onDelta(sampler.Delta{Kind: kind})
	}
	r.modelReady = time.Time{}
	if res.ServiceTier != "" {
		r.tier = res.ServiceTier
	}
	sample := r.srv.now().Sub(t0)
	r.tm.SampleMicros += sample.Microseconds()
	if r.tree != nil && !r.tree.childrenLive(r.agentPath()) {
		r.soloSample += sample // on the tree's critical path (agents.end)
	}
	first := r.firstAt.Sub(t0)
	if !r.first {
		first = sample
	}
	r.tm.FirstTokenMicros += first.Microseconds()
	r.srv.obs.StepSampled(first, sample)
	r.tm.PacerLateMicros += res.PacerLate.Microseconds()
	if e := res.Engine; e != nil {
		r.tm.Add(protocol.Timings{Engine: &protocol.EngineTimings{Simulated: e.Label, QueueMicros: e.Queued.Microseconds(),
			FirstTokenMicros: e.FirstToken.Microseconds(), HitTokens: e.Hit, SwappedTokens: e.Swapped, PrefilledTokens: e.Recomputed}})
	}
	if r.open != nil { // the backend stopped mid-part: close it as incomplete
		r.endPart(protocol.StatusIncomplete)
	}
	r.addUsage(res)
	return res, err
}

// offered is the tools the model is offered.
func (r *rollout) offered() []protocol.Tool {
	if r.tools != nil {
		return r.tools
	}
	return r.req.Tools
}

// addUsage counts one sampling step. Input is the whole prompt (a step reads
// all of it); cached input is what the backend's prefix cache already held,
// which is the same whatever transport or design delivered the request.
// A backend that does not report prompt tokens is charged the rendered
// prompt, with nothing cached.
func (r *rollout) addUsage(res sampler.Result) {
	in := res.PromptTokens
	if in == 0 {
		_, prompt := r.read()
		in = len(r.header) + prompt.Len()
	}
	r.usage.Add(protocol.Usage{
		InputTokens:         in,
		InputTokensDetails:  protocol.InputTokensDetails{CachedTokens: res.CachedPromptTokens},
		OutputTokens:        res.OutputTokens + res.ReasoningTokens,
		OutputTokensDetails: protocol.OutputTokensDetails{ReasoningTokens: res.ReasoningTokens},
	})
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(i *int) int {
	if i == nil {
		return 0
	}
	return *i
}

// textFormat is a request's text.format, nil when it sets none.
func textFormat(t *protocol.TextConfig) *protocol.TextFormat {
	if t == nil {
		return nil
	}
	return &t.Format
}

// session names what the rollout is a step of, for an upstream's cache
// (sampler.Request.Session): a suspended rollout is one response for its
// whole life; a turn that continues stored responses belongs to the
// conversation the first of them began.
func (r *rollout) session() string {
	switch {
	case r.path.Design == designSuspend:
		return r.resp.ID
	case len(r.chain) > 0:
		return r.chain[0]
	}
	return ""
}
