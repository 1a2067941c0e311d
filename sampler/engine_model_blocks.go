package sampler

// An engine model (enginemodel.Cache) names a prompt's KV blocks by the
// hash of the whole prefix each ends, as vLLM does. A Prompt does not keep
// every token (a suspended rollout lets its older items' ids go, Bare): it
// keeps, at every item boundary, the hash of the tokens through it. The
// served engine names block j by the first item boundary at or past its
// end, so that two prompts that share their items up to a boundary share
// every block that ends by it; the block that straddles the boundary where
// they part is not shared, as in an engine. A turn's output is in the next
// turn's prompt as items rendered by the runtime, which the model cannot
// hash beforehand: the blocks its output completes are named by the
// prompt's last boundary and their place (outputBlock), the next prompt
// names the blocks past that boundary the same way (modelPrompt.blocks),
// and so finds them, as a simulated rollout's next turn finds its last
// turn's output (enginemodel.Seq.Name).

// modelPrompt is a prompt as the engine model sees it: its item
// boundaries, oldest first, the system block's first.
type modelPrompt struct {
	bounds []boundary
}

// boundary is the end of an item: the tokens through it, and their hash.
type boundary struct {
	at   int
	hash uint64
}

// newModelPrompt is the prompt of a system block of n tokens, hashed hdr,
// followed by p's items.
func newModelPrompt(hdr uint64, n int, p *Prompt) modelPrompt {
	bounds := make([]boundary, p.Items()+1)
	bounds[0] = boundary{n, hdr}
	i := len(bounds) - 1
	for s := p; s != nil; s = s.parent {
		bounds[i] = boundary{n + s.len, boundaryHash(hdr, s.sum)}
		i--
	}
	return modelPrompt{bounds}
}

// tokens is the prompt's length.
func (mp modelPrompt) tokens() int { return mp.bounds[len(mp.bounds)-1].at }

// last is the hash of the whole prompt: what its output's blocks are named
// by.
func (mp modelPrompt) last() uint64 { return mp.bounds[len(mp.bounds)-1].hash }

// blocks names the prompt's full blocks of blockTokens tokens. output
// reports how many tokens a turn whose prompt ended at a boundary (by its
// hash) made, if the model served one: the blocks that turn's output
// completed are named as that turn named them (outputBlocks), in this
// prompt and in every later one.
func (mp modelPrompt) blocks(blockTokens int, output func(hash uint64) (int, bool)) []uint64 {
	out := make([]uint64, mp.tokens()/blockTokens)
	named := make([]bool, len(out))
	for _, b := range mp.bounds[1:] {
		n, ok := output(b.hash)
		if !ok {
			continue
		}
		for j := b.at / blockTokens; j < len(out) && (j+1)*blockTokens <= b.at+n; j++ {
			out[j], named[j] = outputBlock(b.hash, j), true
		}
	}
	k := 0 // the first boundary at or past block j's end
	for j := range out {
		end := (j + 1) * blockTokens
		for mp.bounds[k].at < end {
			k++
		}
		if !named[j] {
			out[j] = boundaryHash(mp.bounds[k].hash, uint64(j)+1)
		}
	}
	return out
}

// outputBlocks names the blocks a turn of this prompt completes with n
// tokens of output: those past its last full block.
func (mp modelPrompt) outputBlocks(blockTokens, n int) []uint64 {
	total := mp.tokens()
	var out []uint64
	for j := total / blockTokens; (j+1)*blockTokens <= total+n; j++ {
		out = append(out, outputBlock(mp.last(), j))
	}
	return out
}

// outputBlock names block j of a turn's output, the turn's prompt hashed
// prompt: apart from the blocks of any prompt (a different mix).
func outputBlock(prompt uint64, j int) uint64 {
	return boundaryHash(^prompt, uint64(j)+1)
}
