package protocol

import (
	"unsafe"
)

// A response object echoes its request: model, instructions, tools,
// sampling settings, metadata. Those fields are most of its bytes (the
// tools alone are often kilobytes), they do not change while the response
// runs, and a suspended rollout sends its response object at every pause
// and every resume. KeepEcho encodes them once; every later encoding of
// the response, or of a shallow copy of it (a pause's step view), copies
// those bytes and encodes only the fields that change. The bytes are
// those the general encoder writes, field for field and in the same order
// (TestEchoSameBytes).

// echo is a response's encoded echo: the static fields' JSON in the four
// runs the struct's field order leaves between the fields that change, and
// the fields it encoded, to tell whether a response still has them.
type echo struct {
	of   Response
	runs [4][]byte // each a run of members, without braces or outer commas
}

// The fields of Response that change while it runs, in the runs between
// the echo's: each group is encoded on its own and spliced in. Their tags
// are Response's (TestEchoCoversResponse checks that every field of
// Response is in exactly one group).
type (
	echoRun1 struct {
		ID        string `json:"id"`
		Object    string `json:"object"`
		CreatedAt int64  `json:"created_at"`
	}
	stateRun1 struct {
		CompletedAt       *int64             `json:"completed_at"`
		Status            ResponseStatus     `json:"status"`
		IncompleteDetails *IncompleteDetails `json:"incomplete_details"`
	}
	echoRun2 struct {
		Model              string           `json:"model"`
		PreviousResponseID *string          `json:"previous_response_id"`
		Conversation       *ConversationRef `json:"conversation,omitempty"`
		Instructions       *string          `json:"instructions"`
	}
	stateRun2 struct {
		Output Items          `json:"output"`
		Error  *ResponseError `json:"error"`
	}
	echoRun3 struct {
		Tools             []Tool          `json:"tools"`
		ToolChoice        ToolChoice      `json:"tool_choice"`
		Truncation        string          `json:"truncation"`
		ParallelToolCalls bool            `json:"parallel_tool_calls"`
		Text              TextConfig      `json:"text"`
		TopP              float64         `json:"top_p"`
		PresencePenalty   float64         `json:"presence_penalty"`
		FrequencyPenalty  float64         `json:"frequency_penalty"`
		TopLogprobs       int             `json:"top_logprobs"`
		Temperature       float64         `json:"temperature"`
		Reasoning         ReasoningConfig `json:"reasoning"`
	}
	stateRun3 struct {
		Usage *Usage `json:"usage"`
	}
	echoRun4 struct {
		MaxOutputTokens      *int              `json:"max_output_tokens"`
		MaxToolCalls         *int              `json:"max_tool_calls"`
		Store                bool              `json:"store"`
		Background           bool              `json:"background"`
		ServiceTier          string            `json:"service_tier"`
		Metadata             map[string]string `json:"metadata"`
		SafetyIdentifier     *string           `json:"safety_identifier"`
		PromptCacheKey       *string           `json:"prompt_cache_key"`
		PromptCacheRetention *string           `json:"prompt_cache_retention"`
		User                 *string           `json:"user"`
	}
	stateRun4 struct {
		OutputOffset   *int            `json:"output_offset,omitempty"`
		ForkedFrom     *string         `json:"forked_from,omitempty"`
		RequiredAction *RequiredAction `json:"required_action,omitempty"`
		Timings        *Timings        `json:"timings,omitempty"`
	}
)

// KeepEcho encodes r's echo of its request once, for every later encoding
// of r and of its shallow copies (see echo). Call it once those fields are
// set; a response whose echo has changed since (a fork's new id) is
// encoded whole until KeepEcho is called again. A response whose kept echo
// is still its echo keeps it: nothing is encoded again. It is not safe to
// call while r is being encoded.
func (r *Response) KeepEcho() error {
	if r.echo != nil && r.echo.of.sameEcho(r) {
		return nil
	}
	e := &echo{of: *r}
	// The snapshot is compared on the echo's fields only: it holds none of
	// the rest (the output so far, an older echo).
	e.of.CompletedAt, e.of.Status, e.of.IncompleteDetails, e.of.Output, e.of.Error = nil, "", nil, nil, nil
	e.of.Usage, e.of.OutputOffset, e.of.ForkedFrom, e.of.RequiredAction, e.of.Timings, e.of.echo = nil, nil, nil, nil, nil, nil
	for i, run := range [...]any{
		&echoRun1{r.ID, r.Object, r.CreatedAt},
		&echoRun2{r.Model, r.PreviousResponseID, r.Conversation, r.Instructions},
		&echoRun3{r.Tools, r.ToolChoice, r.Truncation, r.ParallelToolCalls, r.Text, r.TopP, r.PresencePenalty,
			r.FrequencyPenalty, r.TopLogprobs, r.Temperature, r.Reasoning},
		&echoRun4{r.MaxOutputTokens, r.MaxToolCalls, r.Store, r.Background, r.ServiceTier, r.Metadata,
			r.SafetyIdentifier, r.PromptCacheKey, r.PromptCacheRetention, r.User},
	} {
		b, err := AppendMarshal(nil, run)
		if err != nil {
			return err
		}
		e.runs[i] = b[1 : len(b)-1] // every run has members: none is omitempty throughout
	}
	r.echo = e
	return nil
}

// EchoSize is how many bytes r's kept echo holds, 0 when it has none.
func (r *Response) EchoSize() int {
	if r.echo == nil {
		return 0
	}
	n := 0
	for _, run := range r.echo.runs {
		n += len(run)
	}
	return n
}

// DropEcho lets r's kept echo go: r is encoded whole from then on. A
// response that outlives its run (stored, cached) holds no second copy of
// its request's fields.
func (r *Response) DropEcho() { r.echo = nil }

// appendKept appends v as JSON when it is a response, or a response event,
// with a kept echo that is still its echo; ok is false (and dst unchanged)
// otherwise.
func appendKept(dst []byte, v any) (_ []byte, ok bool, _ error) {
	switch v := v.(type) {
	case *Response:
		return appendResponse(dst, v)
	case *ResponseEvent:
		if v.Response == nil || v.Response.echo == nil {
			return dst, false, nil
		}
		b, plain := appendHeader(dst, &v.EventHeader)
		if !plain {
			return dst, false, nil
		}
		b, ok, err := appendResponse(append(b, `,"response":`...), v.Response)
		if !ok || err != nil {
			return dst, ok, err
		}
		return append(b, '}'), true, nil
	}
	return dst, false, nil
}

// appendResponse appends r as JSON using its kept echo, and reports false
// (dst unchanged) when it has none, or r's echo is no longer the one kept.
func appendResponse(dst []byte, r *Response) ([]byte, bool, error) {
	e := r.echo
	if e == nil || !e.of.sameEcho(r) {
		return dst, false, nil
	}
	b := append(dst, '{')
	b = append(b, e.runs[0]...)
	// Each state run by its fast path (stateruns.go), or, where that does
	// not take it whole, by the codec (what the fast path wrote past b's
	// length is written over).
	var err error
	if fb, ok := appendStateRun1(b, r); ok {
		b = fb
	} else if b, err = appendMembers(b, &stateRun1{r.CompletedAt, r.Status, r.IncompleteDetails}); err != nil {
		return dst, true, err
	}
	b = append(append(b, ','), e.runs[1]...)
	if fb, ok := appendStateRun2(b, r); ok {
		b = fb
	} else if b, err = appendMembers(b, &stateRun2{r.Output, r.Error}); err != nil {
		return dst, true, err
	}
	b = append(append(b, ','), e.runs[2]...)
	if fb, ok := appendStateRun3(b, r); ok {
		b = fb
	} else if b, err = appendMembers(b, &stateRun3{r.Usage}); err != nil {
		return dst, true, err
	}
	b = append(append(b, ','), e.runs[3]...)
	if fb, ok := appendStateRun4(b, r); ok {
		b = fb
	} else if b, err = appendMembers(b, &stateRun4{r.OutputOffset, r.ForkedFrom, r.RequiredAction, r.Timings}); err != nil {
		return dst, true, err
	}
	return append(b, '}'), true, nil
}

// appendMembers appends the members of the struct v encodes to, each after
// a comma: the object's braces are dropped, and an object with no members
// appends nothing.
func appendMembers(dst []byte, v any) ([]byte, error) {
	start := len(dst)
	b, err := AppendMarshal(dst, v)
	if err != nil {
		return dst, err
	}
	if len(b)-start == 2 { // {}
		return dst, nil
	}
	b[start] = ','
	return b[:len(b)-1], nil
}

// sameEcho reports whether r echoes its request as e, the response its
// echo was encoded from, did: the same values, or for references (a tool
// list, the metadata, a pointer) the same ones. Those are never changed in
// place once a response is running; a new value is a new reference.
func (e *Response) sameEcho(r *Response) bool {
	return e.ID == r.ID && e.Object == r.Object && e.CreatedAt == r.CreatedAt &&
		e.Model == r.Model && e.PreviousResponseID == r.PreviousResponseID &&
		e.Conversation == r.Conversation && e.Instructions == r.Instructions &&
		sameSlice(e.Tools, r.Tools) && e.ToolChoice.same(&r.ToolChoice) &&
		e.Truncation == r.Truncation && e.ParallelToolCalls == r.ParallelToolCalls &&
		e.Text.same(&r.Text) && e.TopP == r.TopP && e.PresencePenalty == r.PresencePenalty &&
		e.FrequencyPenalty == r.FrequencyPenalty && e.TopLogprobs == r.TopLogprobs &&
		e.Temperature == r.Temperature && e.Reasoning == r.Reasoning &&
		e.MaxOutputTokens == r.MaxOutputTokens && e.MaxToolCalls == r.MaxToolCalls &&
		e.Store == r.Store && e.Background == r.Background && e.ServiceTier == r.ServiceTier &&
		sameMap(e.Metadata, r.Metadata) && e.SafetyIdentifier == r.SafetyIdentifier &&
		e.PromptCacheKey == r.PromptCacheKey && e.PromptCacheRetention == r.PromptCacheRetention &&
		e.User == r.User
}

func (c *ToolChoice) same(o *ToolChoice) bool {
	return c.Mode == o.Mode && c.Function == o.Function && c.Custom == o.Custom &&
		c.Builtin == o.Builtin && sameSlice(c.Allowed, o.Allowed)
}

func (t *TextConfig) same(o *TextConfig) bool {
	f, g := &t.Format, &o.Format
	return t.Verbosity == o.Verbosity && f.Type == g.Type && f.Name == g.Name &&
		f.Description == g.Description && sameMap(f.Schema, g.Schema) && f.Strict == g.Strict
}

// sameSlice reports whether a and b are the same slice: the same array and
// length (a nil and an empty slice differ: they encode differently).
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b) && (a == nil) == (b == nil)
}

// sameMap reports whether a and b are the same map (both nil included).
func sameMap[K comparable, V any](a, b map[K]V) bool {
	return *(*unsafe.Pointer)(unsafe.Pointer(&a)) == *(*unsafe.Pointer)(unsafe.Pointer(&b))
}
