package runtime

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/tether-run/tether/runtime/internal/outbox"

	"github.com/tether-run/tether/runtime/internal/ids"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// handleChat serves POST /v1/chat/completions over the same samplers as
// /v1/responses: one sampling step, answered as a chat.completion, or with
// stream as chat.completion.chunk events. It is a model endpoint, not an
// agent loop: no tool runs here and nothing is stored; the client runs the
// functions the model calls and sends their results in its next request.
//
// An error before the first chunk is an HTTP error; one after it is a last
// `data: {"error": {...}}` event, without [DONE].
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	body, done, perr := s.readHeldBody(w, r)
	defer done()
	if perr != nil {
		writeError(w, perr)
		return
	}
	req, perr := protocol.DecodeChatRequest(body)
	if perr != nil {
		writeError(w, perr)
		return
	}
	cc, perr := req.Context()
	if perr != nil {
		writeError(w, perr)
		return
	}
	model, perr := s.model(req.Model)
	if perr == nil {
		perr = s.offersRequired(req.Model, model, cc.Tools, cc.ToolChoice)
	}
	logprobs := req.Logprobs != nil && *req.Logprobs
	if perr == nil {
		perr = chatLogprobsAsked(req, model)
	}
	if perr != nil {
		writeError(w, perr)
		return
	}
	var prompt *sampler.Prompt
	for _, it := range cc.Items {
		prompt = prompt.Append(s.renderer.Item(it))
	}
	sreq := &sampler.Request{
		Model:           req.Model,
		Instructions:    cc.Instructions,
		Items:           cc.Items,
		Tools:           cc.Tools,
		ToolChoice:      cc.ToolChoice,
		MaxOutputTokens: cc.MaxOutputTokens,
		Prompt:          prompt,
		Logprobs:        logprobs,
		TopLogprobs:     derefInt(req.TopLogprobs),
		CacheKey:        derefString(req.PromptCacheKey),
	}
	c := &chatAnswer{
		head: protocol.ChatCompletion{
			ID:      strings.Replace(ids.New("chatcmpl"), "_", "-", 1),
			Object:  protocol.ObjectChatCompletion,
			Created: s.now().Unix(),
			Model:   req.Model,
		},
		promptTokens: len(s.renderer.Header(cc.Instructions, cc.Tools)) + prompt.Len(),
		logprobs:     logprobs,
	}
	sreq.Response = c.head.ID
	ctx, cancel := s.requestContext(r)
	defer cancel()
	c.cancel = cancel
	served(r)
	if req.Stream {
		c.head.Object = protocol.ObjectChatCompletionChunk
		c.stream = &chatStream{out: s.newOutbox(),
			usage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
		s.streamChat(ctx, w, c, func() (sampler.Result, error) { return model.Sample(ctx, sreq, c.onDelta) })
		return
	}
	res, err := model.Sample(ctx, sreq, c.onDelta)
	switch {
	case ctx.Err() != nil:
		return // the client is gone
	case err != nil:
		writeError(w, protocol.AsError(err))
	default:
		writeJSON(w, http.StatusOK, c.completion(res))
	}
}

// streamChat streams c's chunks as sample produces them. The sampler's
// emit may run on its engine's goroutine, which steps other streams too:
// it only queues them (chatStream.data), and this goroutine writes them,
// as streamSSE does for /v1/responses; a client that does not read is cut
// by Timeouts.Write, or when its queue passes the outbox's bounds.
func (s *Server) streamChat(ctx context.Context, w http.ResponseWriter, c *chatAnswer, sample func() (sampler.Result, error)) {
	st := c.stream
	defer st.out.Close() // last: what its writer did not write is let go
	ran := make(chan struct{})
	var early *protocol.Error // an error before the first chunk: an HTTP error
	go func() {
		defer close(ran)
		defer st.out.End()
		res, err := sample()
		switch {
		case ctx.Err() != nil: // the client is gone, or its writes failed
		case err != nil && !st.started:
			early = protocol.AsError(err)
		case err != nil:
			st.data(protocol.AsError(err).HTTPErrorBody())
		default:
			c.endStream(res)
		}
	}()
	defer func() { <-ran }()
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{}) // the connection may serve the next request
	started := false
	for {
		batch := st.out.Next(ctx)
		if batch == nil {
			if <-ran; early != nil {
				writeError(w, early)
			}
			return
		}
		if !started {
			h := w.Header()
			h.Set("Content-Type", "text/event-stream; charset=utf-8")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		rc.SetWriteDeadline(time.Now().Add(s.opts.Timeouts.Write))
		for _, q := range batch {
			if _, err := w.Write(q.Bytes); err != nil {
				c.cancel() // the client is gone: stop sampling
				return
			}
		}
		if err := rc.Flush(); err != nil {
			c.cancel()
			return
		}
	}
}

// chatAnswer builds one answer from a sample's deltas: it collects them, or
// queues them as chunks. It is owned by the goroutine the sampler emits on
// while the sample runs, then by the one that called Sample.
type chatAnswer struct {
	head         protocol.ChatCompletion // id, object, created, model
	promptTokens int
	stream       *chatStream // nil unless streaming
	cancel       context.CancelFunc

	text  strings.Builder // the messages' text, collected when not streaming
	texts int             // messages begun
	calls []protocol.ChatToolCall

	logprobs bool               // the request asked for logprobs
	probs    []protocol.LogProb // the text's, collected when not streaming
}

// chatLogprobsAsked checks a chat request's logprobs and top_logprobs:
// top_logprobs (0–20) needs logprobs, and the model must give them.
func chatLogprobsAsked(req *protocol.ChatRequest, model Sampler) *protocol.Error {
	asked := req.Logprobs != nil && *req.Logprobs
	if req.TopLogprobs != nil {
		switch {
		case *req.TopLogprobs < 0 || *req.TopLogprobs > 20:
			return protocol.Invalid(protocol.CodeInvalidValue, "top_logprobs", "Invalid 'top_logprobs': %d. Expected a value between 0 and 20.", *req.TopLogprobs)
		case !asked:
			return protocol.Invalid(protocol.CodeInvalidValue, "top_logprobs", "'top_logprobs' needs 'logprobs' set to true.")
		}
	}
	if lm, ok := model.(LogprobSampler); asked && (!ok || !lm.Logprobs()) {
		return protocol.Invalid(protocol.CodeUnsupportedParameter, "logprobs", "The model '%s' cannot give logprobs: it does not say how likely its tokens were.", req.Model)
	}
	return nil
}

// logprobsJSON is a choice's logprobs: {"content":[…],"refusal":null}.
func logprobsJSON(probs []protocol.LogProb) json.RawMessage {
	if probs == nil {
		probs = []protocol.LogProb{}
	}
	b, _ := protocol.Marshal(struct {
		Content []protocol.LogProb `json:"content"`
		Refusal []protocol.LogProb `json:"refusal"`
	}{Content: probs})
	return b
}

// messageSep separates the text of a step's messages, which chat joins into
// one content.
const messageSep = "\n\n"

func (c *chatAnswer) onDelta(d sampler.Delta) {
	var delta protocol.ChatDelta
	switch d.Kind {
	case sampler.TextStart:
		c.texts++
		if c.texts == 1 {
			if c.stream != nil && !c.stream.started {
				c.chunk(delta) // the role chunk, as soon as the message begins
			}
			return
		}
		delta.Content = ptr(messageSep)
	case sampler.TextDelta:
		delta.Content = ptr(d.Text)
		if c.logprobs && c.stream == nil {
			c.probs = append(c.probs, d.Logprobs...)
		}
	case sampler.CallStart:
		call := protocol.ChatToolCall{ID: d.CallID, Type: "function", Function: protocol.ChatFunctionCall{Name: d.Name}}
		c.calls = append(c.calls, call)
		call.Index = ptr(len(c.calls) - 1)
		delta.ToolCalls = []protocol.ChatToolCall{call}
	case sampler.ArgsDelta:
		if len(c.calls) == 0 {
			return
		}
		i := len(c.calls) - 1
		c.calls[i].Function.Arguments += d.Text
		delta.ToolCalls = []protocol.ChatToolCall{{Index: ptr(i), Function: protocol.ChatFunctionCall{Arguments: d.Text}}}
	default: // PartEnd has nothing to say in chat; citations have no chat form here
		return
	}
	if c.stream == nil {
		if delta.Content != nil {
			c.text.WriteString(*delta.Content)
		}
		return
	}
	if c.logprobs && (d.Kind == sampler.TextDelta || d.Kind == sampler.TextStart) {
		c.chunkWith(delta, logprobsJSON(d.Logprobs)) // a later message's separator: no tokens of the model's
		return
	}
	c.chunk(delta)
}

func (c *chatAnswer) finishReason(res sampler.Result) string {
	switch {
	case res.Incomplete:
		return protocol.FinishLength
	case len(c.calls) > 0:
		return protocol.FinishToolCalls
	}
	return protocol.FinishStop
}

// usage counts the prompt as the backend read it when it says, else as
// rendered here.
func (c *chatAnswer) usage(res sampler.Result) *protocol.ChatUsage {
	u := &protocol.ChatUsage{PromptTokens: c.promptTokens, CompletionTokens: res.OutputTokens}
	if res.PromptTokens > 0 {
		u.PromptTokens, u.PromptTokensDetails.CachedTokens = res.PromptTokens, res.CachedPromptTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// completion is the whole answer of a request that did not stream.
func (c *chatAnswer) completion(res sampler.Result) *protocol.ChatCompletion {
	msg := &protocol.ChatReply{Role: protocol.RoleAssistant, ToolCalls: c.calls}
	if c.texts > 0 {
		msg.Content = ptr(c.text.String())
	}
	out := c.head
	out.Choices = []protocol.ChatChoice{{Message: msg, FinishReason: ptr(c.finishReason(res))}}
	if c.logprobs {
		out.Choices[0].Logprobs = logprobsJSON(c.probs)
	}
	out.Usage = c.usage(res)
	return &out
}

// chatStream queues chunks as server-sent events: "data: JSON\n\n", ending
// with "data: [DONE]\n\n", for streamChat to write. The status line and
// headers go out with the first chunk, so that an error before it can still
// be an HTTP error. It is owned by the goroutine the sampler emits on.
type chatStream struct {
	out     *outbox.Outbox
	usage   bool // stream_options.include_usage
	started bool // a chunk was queued
}

// chunk sends one chunk of the choice. The first one also carries the role.
func (c *chatAnswer) chunk(delta protocol.ChatDelta) { c.chunkWith(delta, nil) }

// chunkWith is chunk with the choice's logprobs (nil: null).
func (c *chatAnswer) chunkWith(delta protocol.ChatDelta, logprobs json.RawMessage) {
	if !c.stream.started {
		if delta.Content == nil && delta.ToolCalls == nil {
			delta.Content = ptr("")
		}
		delta.Role = protocol.RoleAssistant
	}
	out := c.head
	out.Choices = []protocol.ChatChoice{{Delta: &delta, Logprobs: logprobs}}
	c.send(&out)
}

// endStream sends the finish chunk, the usage chunk when asked for, and [DONE].
func (c *chatAnswer) endStream(res sampler.Result) {
	if !c.stream.started {
		c.chunk(protocol.ChatDelta{})
	}
	out := c.head
	out.Choices = []protocol.ChatChoice{{Delta: &protocol.ChatDelta{}, FinishReason: ptr(c.finishReason(res))}}
	c.send(&out)
	if c.stream.usage {
		out.Choices = []protocol.ChatChoice{}
		out.Usage = c.usage(res)
		c.send(&out)
	}
	c.stream.data([]byte("[DONE]"))
}

func (c *chatAnswer) send(chunk *protocol.ChatCompletion) {
	b, err := protocol.Marshal(chunk)
	if err == nil {
		err = c.stream.data(b)
	}
	if err != nil {
		c.cancel() // the client is gone: stop sampling
	}
}

// data queues one event, without waiting for the client.
func (s *chatStream) data(b []byte) error {
	s.started = true
	frame := make([]byte, 0, len("data: \n\n")+len(b))
	frame = append(frame, "data: "...)
	frame = append(frame, b...)
	return s.out.Put(append(frame, "\n\n"...), nil)
}
