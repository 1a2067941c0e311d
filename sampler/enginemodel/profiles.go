package enginemodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// Llama3_8B_A100 is Llama-3-8B served by a vLLM-like engine on one A100
// 80GB, each figure with where it comes from. A decode step is the model's
// linear layers (Vidur's profile of them) and the reading of every
// decoding context's KV cache at the memory's peak bandwidth, which makes
// it faster than a real attention kernel; prefill is the linear layers'
// rate, without attention's share, which grows with the prompt.
func Llama3_8B_A100() *Profile {
	const (
		weights = 16_060_000_000 // 8.03 B parameters · 2 bytes
		memory  = 72_000_000_000 - weights
	)
	p := &Profile{Name: "llama3-8b-a100", Layers: 32, KVHeads: 8, HeadDim: 128, BytesPerValue: 2, KVBytesPerToken: 2 * 32 * 8 * 128 * 2,
		KVMemoryBytes: memory, CapacityTokens: memory / (2 * 32 * 8 * 128 * 2) / 16 * 16, BlockTokens: 16,
		DecodeBase: 9700 * time.Microsecond, DecodePerSeq: 27 * time.Microsecond, PrefillTokensPerSec: 14400,
		SwapBytesPerSec: 22e9, KVReadBytesPerSec: 2039e9,
		Sources: map[string]string{
			"Layers":              `Meta-Llama-3-8B config.json: "num_hidden_layers": 32 (also microsoft/vidur vidur/config/model_config.py Llama3_8BModelConfig: num_layers 32)`,
			"KVHeads":             `Meta-Llama-3-8B config.json: "num_key_value_heads": 8 (vidur: num_kv_heads 8)`,
			"HeadDim":             `Meta-Llama-3-8B config.json: "head_dim": 128 (hidden_size 4096 / 32 attention heads)`,
			"BytesPerValue":       `Meta-Llama-3-8B config.json: "torch_dtype": "bfloat16", 2 bytes`,
			"KVMemoryBytes":       "0.9 (vLLM's gpu_memory_utilization default, vllm/engine/arg_utils.py) · 80 GB (vidur's A100 device config, total_memory_gb 80) − 16.06 GB of weights (8.03 B parameters · 2 bytes) = 55.94 GB; activations take some of it in a real engine",
			"DecodeBase":          "microsoft/vidur data/profiling/compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv, one GPU: the medians of a layer's non-attention operations · 32 layers = 9.70 ms at batch 1 (10.91 at 32, 11.23 at 64, 13.18 at 128); a line through batch 1 to 128",
			"DecodePerSeq":        "the same line's slope: (13.18 − 9.70) ms / 127 ≈ 27 µs a sequence",
			"PrefillTokensPerSec": "the same profile: 2,048 prompt tokens in 141.8 ms ≈ 14,400 tokens/s (4,096 in 272.9 ms: 15,000)",
			"SwapBytesPerSec":     "PCIe 4.0 ×16: 32 GB/s a direction (NVIDIA's A100 datasheet, as glennklockwood.com/garden/processors/A100 lists it; 31.5 GB/s after encoding), less the 20–40% that transfers lose (fridayswithfaraday.com, GPU hardware: PCIe Gen5 bandwidth) at its middle: 22 GB/s",
			"KVReadBytesPerSec":   "A100 80GB SXM4: 80 GB of HBM2e at 2,039 GB/s (NVIDIA's A100 datasheet, as glennklockwood.com/garden/processors/A100 lists it); a step reads each decoding context once, at the peak",
		}}
	return p
}

// builtin are the profiles named by BuiltinProfile.
var builtin = map[string]func() *Profile{"llama3-8b-a100": Llama3_8B_A100}

// BuiltinProfiles lists the built-in profiles' names.
func BuiltinProfiles() []string { return slices.Sorted(maps.Keys(builtin)) }

// LoadProfile is the built-in profile of that name, or the profile in the
// JSON file at that path (Profile's fields by name, durations as Go
// durations: "9.7ms"), checked.
func LoadProfile(nameOrPath string) (*Profile, error) {
	if f := builtin[nameOrPath]; f != nil {
		return f(), nil
	}
	b, err := os.ReadFile(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("enginemodel: profile %q: not one of %s, nor a file: %w", nameOrPath, strings.Join(BuiltinProfiles(), ", "), err)
	}
	var f struct {
		Profile
		DecodeBase   string
		DecodePerSeq string
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("enginemodel: profile %s: %w", nameOrPath, err)
	}
	p := f.Profile
	for _, d := range []struct {
		s  string
		to *time.Duration
	}{{f.DecodeBase, &p.DecodeBase}, {f.DecodePerSeq, &p.DecodePerSeq}} {
		if *d.to, err = time.ParseDuration(d.s); err != nil {
			return nil, fmt.Errorf("enginemodel: profile %s: %w", nameOrPath, err)
		}
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	return &p, nil
}
