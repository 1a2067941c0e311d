package sampler

import (
	"context"
	"time"
	"unicode/utf8"
)

// sampleParts is the body every local backend (Scripted, Replay) shares: it
// times the sample from its start, looks the prompt up in the prefix cache
// (the lookup is part of the model's time), asks choose for the parts to
// emit and the unsent tokens to pace first, and streams them.
func sampleParts(ctx context.Context, r *Renderer, t Timing, cache *PrefixCache, req *Request,
	choose func(*Request) (parts []part, skip int), emit func(Delta)) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if req == nil {
		req = &Request{}
	}
	var start time.Time
	if t.Paced() {
		if start = req.Start; start.IsZero() {
			start = time.Now()
		}
	}
	prompt, cached := cache.Prefill(req)
	pc := NewPacer(t, start, prompt-cached)
	defer pc.Stop()
	parts, skip := choose(req)
	res, err := streamParts(ctx, r, pc, skip, parts, req.MaxOutputTokens, emit)
	res.PromptTokens, res.CachedPromptTokens, res.ReasoningTokens = prompt, cached, skip
	res.PacerLate = pc.Late()
	return res, err
}

// streamParts emits parts token by token on pc's schedule, after skip
// tokens that are paced but not sent (reasoning). A Start delta is emitted
// when its part's first token is due, right before it; a citation once the
// text it cites has streamed. Every part is tokenized before the first wait,
// during the time to first token, so that the work does not make the first
// token late.
func streamParts(ctx context.Context, r *Renderer, pc *Pacer, skip int, parts []part, limit int, emit func(Delta)) (Result, error) {
	toks := make([][]string, len(parts))
	for i, p := range parts {
		if toks[i] = p.toks; toks[i] == nil {
			toks[i] = r.Tokens(p.text)
		}
	}
	var res Result
	for k, p := range parts {
		if limit > 0 && res.OutputTokens >= limit {
			res.Incomplete = true
			return res, nil
		}
		if err := pc.Wait(ctx, skip+res.OutputTokens); err != nil {
			return res, err
		}
		start, tok := Delta{Kind: TextStart}, Delta{Kind: TextDelta}
		if p.call {
			start = Delta{Kind: CallStart, CallID: p.callID, Name: p.name, Namespace: p.namespace, CallType: p.callType}
			tok = Delta{Kind: ArgsDelta, CallID: p.callID, Name: p.name, Namespace: p.namespace, CallType: p.callType}
		}
		end := Delta{Kind: PartEnd, CallID: start.CallID, Name: start.Name, Namespace: start.Namespace, CallType: start.CallType}
		emit(start)
		runes, cites := 0, p.cites
		for i, t := range toks[k] {
			if limit > 0 && res.OutputTokens >= limit {
				end.Incomplete = true
				emit(end)
				res.Incomplete = true
				return res, nil
			}
			if i > 0 {
				if err := pc.Wait(ctx, skip+res.OutputTokens); err != nil {
					return res, err
				}
			}
			tok.Text = t
			emit(tok)
			res.OutputTokens++
			runes += utf8.RuneCountInString(t)
			for len(cites) > 0 && cites[0].EndIndex <= runes {
				emit(Delta{Kind: Citation, Annotation: &cites[0]})
				cites = cites[1:]
			}
		}
		emit(end)
	}
	return res, nil
}
