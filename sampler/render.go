package sampler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler/internal/o200k"
)

// Token is one o200k_base token id.
type Token = uint32

// Template markers. The tokenizer has no special tokens for them, so they are
// encoded as plain text, like everything else in a rendered block.
const (
	imStart = "<|im_start|>"
	imEnd   = "<|im_end|>\n"
)

// Placeholders for content that is never rendered byte for byte.
const (
	imagePlaceholder = "[image]"
	videoPlaceholder = "[video]"
)

// Renderer turns instructions, tool definitions and items into chat-template
// text and o200k_base tokens (see the package documentation for the
// template). It holds the codec and no other state: it is safe for concurrent
// use, and every method is a pure function of its arguments.
type Renderer struct {
	codec *o200k.Encoder
}

// NewRenderer returns a Renderer backed by the embedded o200k_base vocabulary.
// It needs no network; the first call in a process builds the vocabulary
// tables, later calls share them.
func NewRenderer() (*Renderer, error) {
	c, err := o200k.New()
	if err != nil {
		return nil, fmt.Errorf("sampler: o200k_base codec: %w", err)
	}
	return &Renderer{codec: c}, nil
}

// Header renders the system block: the instructions, then one line per tool.
// It returns nil when there are neither instructions nor tools.
func (r *Renderer) Header(instructions string, tools []protocol.Tool) []Token {
	b := newRenderBuf()
	defer b.release()
	if !writeHeader(b, instructions, tools) {
		return nil
	}
	return r.encode(b.text())
}

// Render is the full render of a context: the system block and every item,
// as one text tokenized in one pass. It equals Header followed by the Item of
// each item (see the package documentation): a Prompt extended item by item
// holds exactly these tokens.
func (r *Renderer) Render(instructions string, tools []protocol.Tool, items protocol.Items) []Token {
	b := newRenderBuf()
	defer b.release()
	writeHeader(b, instructions, tools)
	for _, it := range items {
		writeItem(b, it)
	}
	if len(b.b) == 0 {
		return nil
	}
	return r.encode(b.text())
}

// writeHeader writes the system block and reports whether there was one.
func writeHeader(b *renderBuf, instructions string, tools []protocol.Tool) bool {
	if instructions == "" && len(tools) == 0 {
		return false
	}
	b.WriteString(imStart)
	b.WriteString("system\n")
	b.WriteString(instructions)
	if len(tools) > 0 {
		if instructions != "" {
			b.WriteByte('\n')
		}
		b.WriteString("# Tools")
		for _, t := range tools {
			b.WriteByte('\n')
			writeTool(b, t)
		}
	}
	b.WriteString(imEnd)
	return true
}

// writeTool writes one tool line: "name: description; parameters: {json}".
// A namespace is a line of its own ("name: description; namespace") and a
// line per member, named "namespace.member"; a custom tool shows its format
// ("format: grammar lark: definition") where a function shows parameters.
func writeTool(b *renderBuf, t protocol.Tool) {
	writeToolIn(b, "", t)
}

func writeToolIn(b *renderBuf, namespace string, t protocol.Tool) {
	name, desc, params := t.Name, "", []byte(t.Parameters)
	if t.Description != nil {
		desc = *t.Description
	}
	switch t.Type {
	case protocol.ToolFunction:
	case protocol.ToolNamespace:
		b.WriteString(oneLine(name))
		b.WriteString(": ")
		b.WriteString(oneLine(desc))
		b.WriteString("; namespace")
		for _, m := range t.Tools {
			b.WriteByte('\n')
			writeToolIn(b, name, m)
		}
		return
	case protocol.ToolCustom:
		b.WriteString(oneLine(qualified(namespace, name)))
		b.WriteString(": ")
		b.WriteString(oneLine(desc))
		b.WriteString("; format: ")
		switch f := t.Format; {
		case f == nil || f.Type != "grammar":
			b.WriteString("text")
		default:
			b.WriteString("grammar " + f.Syntax + ": " + oneLine(f.Definition))
		}
		return
	default:
		// Hosted tools have no name or schema: show the definition as sent.
		if name == "" {
			name = string(t.Type)
		}
		if desc == "" {
			desc = "hosted tool"
		}
		params = t.Raw
	}
	b.WriteString(oneLine(qualified(namespace, name)))
	b.WriteString(": ")
	b.WriteString(oneLine(desc))
	b.WriteString("; parameters: ")
	b.WriteString(compactJSON(params))
}

// Item renders one item as one template block. Items are tokenized
// independently, so the render of a conversation is the concatenation of the
// renders of its items. A nil or unknown item renders to nil.
func (r *Renderer) Item(it protocol.Item) []Token {
	b := newRenderBuf()
	defer b.release()
	if !writeItem(b, it) {
		return nil
	}
	return r.encode(b.text())
}

// AppendBare returns p followed by it, rendered as Item renders it, the
// way Prompt.Bare would leave it: its count and the hash through it, no
// token ids (none is copied). A prompt that lets its ids go at every pause
// renders what it appends this way.
func (r *Renderer) AppendBare(p *Prompt, it protocol.Item) *Prompt {
	b := newRenderBuf()
	defer b.release()
	if !writeItem(b, it) {
		return p.appendBare(nil)
	}
	r.scratch(b.text(), func(toks []Token) { p = p.appendBare(toks) })
	return p
}

// Tokens splits text into o200k_base token strings; their concatenation is
// text, byte for byte. Bytes that are not valid UTF-8 are each returned as a
// token of their own (byte-level BPE has a token for every byte).
func (r *Renderer) Tokens(text string) []string {
	var out []string
	piece := func(_ uint32, tok string) { out = append(out, tok) }
	if faithful(text) {
		r.codec.Each(text, piece)
		return out
	}
	r.split(text, func(run string) {
		r.codec.Each(run, piece)
	}, func(b string) {
		out = append(out, b)
	})
	return out
}

// Count is the number of tokens in text: len(r.Tokens(text)), without
// materializing them.
func (r *Renderer) Count(text string) int {
	if faithful(text) {
		return r.codec.Count(text)
	}
	var total int
	r.split(text, func(run string) {
		total += r.codec.Count(run)
	}, func(string) {
		total++
	})
	return total
}

// encode tokenizes a rendered block. Invalid UTF-8 is replaced with U+FFFD
// first, as tiktoken does with errors="replace".
func (r *Renderer) encode(s string) []Token {
	var toks []Token
	r.scratch(s, func(out []Token) { toks = slices.Clone(out) })
	return toks
}

// scratch tokenizes s into a scratch buffer, which it lends to use for
// the call: encode copies it to its size, one allocation, where appending
// grew the slice by doubling (twice the bytes, and up to twice the size
// kept with the prompt); AppendBare keeps none of it.
func (r *Renderer) scratch(s string, use func([]Token)) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	sp := tokenScratch.Get().(*[]Token)
	out := (*sp)[:0]
	if faithful(s) {
		out = toTokens(out, s, r)
	} else {
		r.split(s, func(run string) {
			out = toTokens(out, run, r)
		}, func(string) {
			out = append(out, delToken) // the only byte split out of valid UTF-8
		})
	}
	use(out)
	if cap(out) <= maxTokenScratch {
		*sp = out
		tokenScratch.Put(sp)
	}
}

// tokenScratch holds encode's buffers; one grown past maxTokenScratch
// tokens (a very long block) is let go.
var tokenScratch = sync.Pool{New: func() any { return new([]Token) }}

const maxTokenScratch = 64 << 10

func toTokens(out []Token, s string, r *Renderer) []Token {
	return r.codec.Append(out, s)
}

// The tokenizer's split expression (tiktoken-go/tokenizer v0.10.0) matches no
// piece for U+007F DELETE, so Encode silently drops it. The Renderer tokenizes
// around it and emits it as its byte token, as it does for invalid UTF-8.
const (
	del      = 0x7f
	delToken = Token(221) // o200k_base's token for the single byte 0x7f
)

// faithful reports whether the codec tokenizes text without losing bytes.
func faithful(text string) bool {
	return strings.IndexByte(text, del) < 0 && utf8.ValidString(text)
}

// split calls run for each stretch of text the codec tokenizes faithfully and
// raw for each byte it would drop or alter (DEL, invalid UTF-8), in order.
func (r *Renderer) split(text string, run func(string), raw func(string)) {
	from := 0
	for i := 0; i < len(text); {
		c, n := utf8.DecodeRuneInString(text[i:])
		if c != del && (c != utf8.RuneError || n > 1) {
			i += n
			continue
		}
		if from < i {
			run(text[from:i])
		}
		raw(text[i : i+1])
		i++
		from = i
	}
	if from < len(text) {
		run(text[from:])
	}
}

// qualified is "namespace.name", or name outside a namespace: how the
// template names a namespace's member, and one string that tells two calls
// apart (tool names have no dots).
func qualified(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "." + name
}

// oneLine folds line breaks to spaces so a tool stays on one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}

// compactJSON is raw without insignificant whitespace, raw itself (on one
// line) when it is not valid JSON, and "{}" when it is empty or null.
func compactJSON(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return oneLine(string(raw))
	}
	return buf.String()
}
