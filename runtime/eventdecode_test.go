package runtime_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tether-run/tether/runtime"
)

// TestEveryEventDecodes is a property test of what the server writes: for
// requests made of random JSON (schemas of nested values, numbers from
// tiny to past a double's range, strings with control characters,
// invalid UTF-8 and lone surrogates, in tools, metadata and input), every
// frame the server answers with decodes with encoding/json, with
// openai-go's event type, and with a strict decoder (no duplicate names,
// valid UTF-8); a request holding a number no double holds is refused with
// invalid_value, one naming a member twice with invalid_json.
func TestEveryEventDecodes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	r := rand.New(rand.NewPCG(1, 2))
	refused := 0
	for i := range 150 {
		var g jsonGen
		g.r = r
		body := g.request()
		resp, err := http.Post(h.base+"/responses", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case g.overflow:
			refused++
			if resp.StatusCode != 400 || !bytes.Contains(raw, []byte(`"code":"invalid_value"`)) && !g.twice {
				t.Fatalf("request %d holds a number past a double's range: %d %s\n%s", i, resp.StatusCode, raw, body)
			}
		case g.twice:
			refused++
			if resp.StatusCode != 400 || !bytes.Contains(raw, []byte(`"code":"invalid_json"`)) {
				t.Fatalf("request %d names a member twice: %d %s\n%s", i, resp.StatusCode, raw, body)
			}
		}
		if resp.StatusCode != 200 {
			decodesEverywhere(t, raw, false)
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
				decodesEverywhere(t, data, true)
			}
		}
	}
	if refused == 0 || refused == 150 {
		t.Errorf("%d of 150 requests held a number past a double's range: the generator should make some of each", refused)
	}
}

// decodesEverywhere checks that a frame decodes with encoding/json, with a
// strict decoder, and (an event) with openai-go.
func decodesEverywhere(t *testing.T, data []byte, event bool) {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("encoding/json: %v\n%.500s", err, data)
	}
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(false), jsontext.AllowInvalidUTF8(false))
	if _, err := dec.ReadValue(); err != nil {
		t.Fatalf("strict: %v\n%.500s", err, data)
	}
	if event {
		var ev responses.ResponseStreamEventUnion
		if err := ev.UnmarshalJSON(data); err != nil {
			t.Fatalf("openai-go: %v\n%.500s", err, data)
		}
	}
}

// jsonGen writes random JSON text, byte by byte, with what encoders never
// write but clients may send.
type jsonGen struct {
	r        *rand.Rand
	b        bytes.Buffer
	overflow bool // a number past a double's range was written
	twice    bool // an object named a member twice
}

func (g *jsonGen) request() []byte {
	g.b.WriteString(`{"model":"tether-scripted","stream":true,"store":false,"input":`)
	g.str()
	g.b.WriteString(`,"metadata":{"k":`)
	g.str()
	g.b.WriteString(`},"tools":[{"type":"function","name":"probe","description":`)
	g.str()
	g.b.WriteString(`,"parameters":{"type":"object","properties":{"x":`)
	g.object(3)
	g.b.WriteString(`}}}]}`)
	return g.b.Bytes()
}

func (g *jsonGen) value(depth int) {
	switch n := g.r.IntN(10); {
	case depth > 0 && n < 2:
		g.object(depth - 1)
	case depth > 0 && n < 3:
		g.b.WriteByte('[')
		for i := range g.r.IntN(4) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.value(depth - 1)
		}
		g.b.WriteByte(']')
	case n < 6:
		g.number()
	case n < 9:
		g.str()
	default:
		g.b.WriteString([]string{"true", "false", "null"}[g.r.IntN(3)])
	}
}

func (g *jsonGen) object(depth int) {
	g.b.WriteByte('{')
	for i := range 1 + g.r.IntN(4) {
		if i > 0 {
			g.b.WriteByte(',')
		}
		if i > 0 && g.r.IntN(20) == 0 {
			g.twice = true
			i = 0
		}
		fmt.Fprintf(&g.b, `"k%d":`, i)
		g.value(depth)
	}
	g.b.WriteByte('}')
}

func (g *jsonGen) number() {
	numbers := []string{"0", "-0", "7", "-12.5", "3.14e10", "1e300", "-1.7976931348623157e308", "1e-400", "5e-324", "123456789012345678901234567890"}
	switch g.r.IntN(12) {
	case 0:
		g.overflow = true
		g.b.WriteString([]string{"1e999", "-2E+400", "1" + strings.Repeat("0", 330)}[g.r.IntN(3)])
	default:
		g.b.WriteString(numbers[g.r.IntN(len(numbers))])
	}
}

func (g *jsonGen) str() {
	parts := []string{"plain", "é中🙂", `\n\t\"\\`, `\u0000\u001f`, "\u2028", `\ud800`, `\udc00x`, "\xff\xfe", "<&>", "1e999", `\/`}
	g.b.WriteByte('"')
	for range 1 + g.r.IntN(5) {
		g.b.WriteString(parts[g.r.IntN(len(parts))])
	}
	g.b.WriteByte('"')
}
