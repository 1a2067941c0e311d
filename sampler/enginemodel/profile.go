// Package enginemodel models what an inference engine does with the
// sequences of many rollouts at once, for the comparisons tether runs:
// a KV cache of finite capacity shared by every sequence, reused by prefix
// with least-recently-used eviction (as vLLM's and SGLang's prefix caches),
// continuous batching in which a step's time grows with its batch and
// prefill throughput is shared, and what happens to a sequence's cache
// while its rollout waits on tools: discarded, pinned for a time, or
// swapped out and back at a bandwidth.
//
// Simulate serves a fixed list of requests; an Engine is the same engine
// driven a step at a time, and RunLoad drives one with clients that run
// rollouts (Job) back to back, each turn arriving when the last one's
// tools are done, as a design (Design) and a policy say: the closed loop
// that tether ablate --engine runs for its matrix.
//
// It is a model, and every result made with it is simulated: its figures
// come from a Profile, each with its source, and a profile whose figures do
// not add up is refused. The package holds no goroutines and reads no
// clock: callers pass the time.
package enginemodel

import (
	"errors"
	"fmt"
	"time"
)

// Profile is an engine's figures. Each figure named in Sources must say
// where it comes from: a paper's table or figure, or a model's
// configuration with the arithmetic shown.
type Profile struct {
	Name string

	// The model configuration behind the KV cache's size: KVBytesPerToken
	// is 2 (keys and values) · Layers · KVHeads · HeadDim · BytesPerValue.
	Layers, KVHeads, HeadDim, BytesPerValue int
	KVBytesPerToken                         int

	// KVMemoryBytes is the memory the engine gives the KV cache;
	// CapacityTokens what it holds: KVMemoryBytes / KVBytesPerToken,
	// rounded down to whole blocks of BlockTokens.
	KVMemoryBytes  int64
	CapacityTokens int
	BlockTokens    int

	// A step's time: DecodeBase, DecodePerSeq for each sequence in the
	// batch, and the prompt tokens prefilled in it at PrefillTokensPerSec.
	DecodeBase          time.Duration
	DecodePerSeq        time.Duration
	PrefillTokensPerSec float64

	// SwapBytesPerSec is the bandwidth a swapped-out cache comes back at.
	SwapBytesPerSec float64

	// KVReadBytesPerSec is the memory bandwidth a decode step reads its
	// batch's KV cache at: every decoding sequence's context (its prompt
	// and the tokens it made so far) once a step, which is what makes a
	// step of long contexts slow (decode attention is bound by memory).
	// 0: not modelled.
	KVReadBytesPerSec float64

	// MaxBatchedTokens is the engine's setting (not a measured figure) of
	// how many tokens one step may process, decoded and prefilled: a
	// prompt longer than what is left of it is prefilled over several steps
	// (chunked prefill, as vLLM's max_num_batched_tokens). 0: no bound.
	MaxBatchedTokens int

	// Sources says where each figure comes from, by its field's name.
	Sources map[string]string
}

// sourced are the figures that must each have a source.
var sourced = []string{"Layers", "KVHeads", "HeadDim", "BytesPerValue", "KVMemoryBytes",
	"DecodeBase", "DecodePerSeq", "PrefillTokensPerSec", "SwapBytesPerSec"}

// Check refuses a profile whose figures do not add up, or that does not
// say where one comes from.
func (p *Profile) Check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p.Layers <= 0 || p.KVHeads <= 0 || p.HeadDim <= 0 || p.BytesPerValue <= 0 {
		bad("layers, KV heads, head dim and bytes per value must be positive")
	} else if want := 2 * p.Layers * p.KVHeads * p.HeadDim * p.BytesPerValue; p.KVBytesPerToken != want {
		bad("KV bytes per token %d, but 2 · %d layers · %d KV heads · %d head dim · %d bytes = %d",
			p.KVBytesPerToken, p.Layers, p.KVHeads, p.HeadDim, p.BytesPerValue, want)
	}
	if p.BlockTokens <= 0 {
		bad("block tokens must be positive")
	}
	if p.KVBytesPerToken > 0 && p.BlockTokens > 0 {
		tokens := p.KVMemoryBytes / int64(p.KVBytesPerToken)
		want := int(tokens / int64(p.BlockTokens) * int64(p.BlockTokens))
		if p.CapacityTokens != want || want <= 0 {
			bad("capacity %d tokens, but %d bytes of KV memory / %d bytes a token, in blocks of %d, is %d",
				p.CapacityTokens, p.KVMemoryBytes, p.KVBytesPerToken, p.BlockTokens, want)
		}
	}
	if p.DecodeBase < 0 || p.DecodePerSeq < 0 || p.DecodeBase+p.DecodePerSeq <= 0 {
		bad("a decode step must take time")
	}
	if p.PrefillTokensPerSec <= 0 || p.SwapBytesPerSec <= 0 {
		bad("prefill and swap rates must be positive")
	}
	if p.KVReadBytesPerSec < 0 {
		bad("the KV read bandwidth must not be negative")
	} else if p.KVReadBytesPerSec > 0 && p.Sources["KVReadBytesPerSec"] == "" {
		bad("KVReadBytesPerSec has no source")
	}
	if p.MaxBatchedTokens < 0 {
		bad("max batched tokens must not be negative")
	}
	for _, f := range sourced {
		if p.Sources[f] == "" {
			bad("%s has no source", f)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("enginemodel: profile %q refused: %w", p.Name, errors.Join(errs...))
	}
	return nil
}

// StepTime is the time of one engine step that decodes a token for each of
// batch sequences and prefills prefill prompt tokens, shared by the
// sequences that prefill in it.
func (p *Profile) StepTime(batch, prefill int) time.Duration {
	d := p.DecodeBase + time.Duration(batch)*p.DecodePerSeq
	if prefill > 0 {
		d += time.Duration(float64(prefill) / p.PrefillTokensPerSec * float64(time.Second))
	}
	return d
}

// AttentionTime is the time a decode step takes to read the KV cache of
// its batch's contexts, tokens in all (0 when KVReadBytesPerSec is).
func (p *Profile) AttentionTime(tokens int) time.Duration {
	if p.KVReadBytesPerSec <= 0 {
		return 0
	}
	return time.Duration(float64(tokens) * float64(p.KVBytesPerToken) / p.KVReadBytesPerSec * float64(time.Second))
}

// SwapTime is the time tokens of KV cache take to come back from host
// memory.
func (p *Profile) SwapTime(tokens int) time.Duration {
	return time.Duration(float64(tokens) * float64(p.KVBytesPerToken) / p.SwapBytesPerSec * float64(time.Second))
}
