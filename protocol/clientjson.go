package protocol

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// What a client sends, tether may echo: a tool's parameters, an MCP
// schema, a call's action are kept as the client wrote them (raw JSON) and
// written back in response objects and events. JSON allows what many
// decoders refuse, so a request's JSON is made what every client can read
// back before it is decoded: numbers no double holds are refused
// (checkNumbers), invalid UTF-8 and lone surrogate escapes become U+FFFD
// (as encoding/json reads them into a string), and an object with a name
// twice is refused (which of the two a decoder keeps is its own choice).

// unmarshalRequest decodes a client's JSON request into v, as unmarshal
// does, and returns the JSON it decoded: data, or data with its invalid
// UTF-8 and lone surrogates replaced. param is where data is in the
// request, for errors.
func unmarshalRequest(data []byte, v any, param string) ([]byte, *Error) {
	if perr := checkNumbers(data, param); perr != nil {
		return nil, perr
	}
	err := unmarshalStrict(data, v)
	if err == nil {
		return data, nil
	}
	if unmarshal(data, new(jsontext.Value)) != nil {
		return nil, bodyError(err) // not JSON at all: the usual error
	}
	clean, ok := replaceInvalid(data)
	if !ok {
		return nil, bodyError(err)
	}
	if err = unmarshalStrict(clean, v); err == nil {
		return clean, nil
	}
	// Read again, as plain JSON, to say where: the decoder of v reports
	// its errors in encoding/json's words, without the place.
	_, verr := jsontext.NewDecoder(bytes.NewReader(clean)).ReadValue()
	var se *jsontext.SyntacticError
	if errors.Is(verr, jsontext.ErrDuplicateName) && errors.As(verr, &se) {
		name := se.JSONPointer.LastToken()
		return nil, Invalid(CodeInvalidJSON, pointerParam(param, se.JSONPointer),
			"Invalid JSON: an object names its member '%s' twice; clients cannot tell which one holds.", name)
	}
	return nil, bodyError(err)
}

// strictOptions are the package's decoding rules with JSON read as
// strictly as any client reads it.
var strictOptions = jsonv2.JoinOptions(v1Options, jsontext.AllowDuplicateNames(false), jsontext.AllowInvalidUTF8(false))

func unmarshalStrict(data []byte, v any) error { return jsonv2.Unmarshal(data, v, strictOptions) }

// replaceInvalid rewrites a JSON text with its strings' invalid UTF-8 and
// lone surrogate escapes as U+FFFD, as encoding/json reads them; false if
// it is not JSON.
func replaceInvalid(data []byte) ([]byte, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	var out bytes.Buffer
	enc := jsontext.NewEncoder(&out, jsontext.AllowDuplicateNames(true))
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return out.Bytes(), true
		}
		if err != nil {
			return nil, false
		}
		if tok.Kind() == '"' {
			tok = jsontext.String(strings.ToValidUTF8(tok.String(), "\uFFFD"))
		}
		if err := enc.WriteToken(tok); err != nil {
			return nil, false
		}
	}
}

// maxFloatDigits is the most digits a number without an exponent can have
// and be a double: 1.8e308 has 309.
const maxFloatDigits = 309

// checkNumbers refuses a request holding a number no double can hold (such
// as 1e999, or 400 digits): JSON allows it and tether would echo it, in a
// tool's schema, but encoding/json and most clients cannot decode it back,
// so every event that carried it would fail the client. The error's param
// is where the number is, below param (data's own). A fast pass finds
// what may be one (a digit, then an exponent of three digits or more, or a
// run of 309 digits); only then is the request read token by token, which
// tells numbers from text that spells them.
func checkNumbers(data []byte, param string) *Error {
	if !mayOverflow(data) {
		return nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return nil // not JSON: the decoder that follows says so
		}
		if tok.Kind() != '0' {
			continue
		}
		if _, err := strconv.ParseFloat(tok.String(), 64); err != nil {
			n := tok.String()
			if len(n) > 40 {
				n = n[:20] + "…" + n[len(n)-10:]
			}
			return Invalid(CodeInvalidValue, pointerParam(param, dec.StackPointer()),
				"Invalid number %s: it is outside the range of a double (about ±1.8e308), which clients cannot decode back.", n)
		}
	}
}

// mayOverflow reports whether data holds what may be a number too large
// for a double.
func mayOverflow(data []byte) bool {
	digits := 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		if '0' <= c && c <= '9' {
			if digits++; digits >= maxFloatDigits {
				return true
			}
			continue
		}
		if (c == 'e' || c == 'E') && digits > 0 {
			j := i + 1
			if j < len(data) && data[j] == '+' {
				j++
			}
			k := j
			for k < len(data) && '0' <= data[k] && data[k] <= '9' {
				k++
			}
			if k-j >= 3 {
				return true
			}
		}
		digits = 0
	}
	return false
}

// pointerParam is a JSON pointer as an error's param, below the param
// prefix: /tools/0/parameters is tools[0].parameters.
func pointerParam(prefix string, p jsontext.Pointer) string {
	var b strings.Builder
	b.WriteString(prefix)
	for tok := range p.Tokens() {
		appendParamToken(&b, tok)
	}
	return b.String()
}

// appendParamToken appends one step of a path to the param in b, as
// OpenAI writes params and IndexParam makes them: an array's index in
// brackets (input[0]), an object's member after a dot (input[0].content).
// A member whose name is all digits reads as an index: a path does not
// tell them apart.
func appendParamToken(b *strings.Builder, tok string) {
	if b.Len() > 0 && tok != "" && strings.Trim(tok, "0123456789") == "" {
		b.WriteString("[" + tok + "]")
		return
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.WriteString(tok)
}
