package protocol

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// Items is a list of items that decodes from a JSON array.
type Items []Item

// UnmarshalJSON decodes each element with DecodeItem; null leaves nil.
func (is *Items) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		*is = nil
		return nil
	}
	out, err := DecodeItems(b, "input")
	if err != nil {
		return err
	}
	*is = out
	return nil
}

// UnmarshalJSONFrom decodes each element with DecodeItem as dec reads it:
// a value that holds items (a store's state read back) is read over once,
// where UnmarshalJSON would have the whole array read, then split, then
// each element read.
func (is *Items) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() != '[' {
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		return is.UnmarshalJSON(v)
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	out := Items{}
	for i := 0; dec.PeekKind() != ']'; i++ {
		v, err := dec.ReadValue() // valid until dec reads on: an item keeps none of it
		if err != nil {
			return err
		}
		it, perr := DecodeItem(json.RawMessage(v), IndexParam("input", i))
		if perr != nil {
			return perr
		}
		out = append(out, it)
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	*is = out
	return nil
}

// DecodeItems decodes a JSON array of items; param names the array in errors.
func DecodeItems(raw json.RawMessage, param string) (Items, *Error) {
	elems, ok := scanItems(raw)
	if !ok {
		if err := unmarshal(raw, &elems); err != nil {
			return nil, Invalid(CodeInvalidType, param, "Invalid type for '%s': expected an array of items (%s).", param, jsonReason(err))
		}
	}
	out := make(Items, len(elems))
	for i, e := range elems {
		it, perr := DecodeItem(e, IndexParam(param, i))
		if perr != nil {
			return nil, perr
		}
		out[i] = it
	}
	return out, nil
}
