// Package seal seals the items a context compaction replaces into the
// compaction item's encrypted_content, and opens them again: clients
// cannot read or forge a window, and only a server with the same key opens
// it.
//
// A sealed content holds a Payload: the items it stands for, whole (format
// 1: a JSON array of items, what every compaction item held before
// references, and what /v1/responses/compact's items hold still), or the
// items since an earlier window with a Ref to the segment, kept by the
// server, that stands for that window (format 2: a JSON object, {"v":2,
// "prev":{…},"items":[…]}). Both open; which one is sealed is the
// payload's. A segment is itself a sealed content, as bytes: an earlier
// compaction item's content, or several merged (package runtime's
// contextsegments.go), content-addressed by Key.
package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/tether-run/tether/protocol"
)

// Sealer seals compacted items into a compaction item's encrypted_content
// (AES-256-GCM, base64url) and opens them again. Clients cannot read or forge
// the window; only the server that sealed it (or one sharing its key) opens it.
type Sealer struct {
	aead cipher.AEAD
}

// New is a sealer with key (32 bytes: AES-256); a nil key draws a random
// one, and the windows it seals then open on this process alone.
func New(key []byte) (*Sealer, error) {
	if key == nil {
		key = make([]byte, 32)
		rand.Read(key)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("seal: compaction key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// Payload is what a sealed content holds: Items, and, when Prev is set, a
// reference to the segment that stands for the items before them. The
// window it stands for is then the segment's window and Items; without
// Prev, Items alone.
type Payload struct {
	Prev  *Ref
	Items protocol.Items
}

// Ref refers to a segment a server keeps: by its Key, with the count of
// items the window it opens into holds, and its Span, how many
// compactions' items the segment holds itself (not counting those its own
// Prev stands for), which says which segments merge (package runtime).
type Ref struct {
	Key   string `json:"key"`
	Items int    `json:"items"`
	Span  int    `json:"span"`
}

// formatRef is the version of the payload that refers to a segment.
const formatRef = 2

// envelope is a format 2 payload as it is sealed.
type envelope struct {
	V     int             `json:"v"`
	Prev  *Ref            `json:"prev"`
	Items json.RawMessage `json:"items"`
}

// Seal encrypts p into the content of a compaction item: in format 1 when
// it refers to nothing, else in format 2.
func (s *Sealer) Seal(p Payload) (string, error) {
	plain, err := protocol.Marshal(p.Items)
	if err != nil {
		return "", err
	}
	if p.Prev != nil {
		if plain, err = protocol.Marshal(envelope{V: formatRef, Prev: p.Prev, Items: plain}); err != nil {
			return "", err
		}
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, nil)), nil
}

// Open decrypts the content Seal made back into its payload; content that
// is not that, or was sealed under another key, is refused as invalid at
// param.
func (s *Sealer) Open(content, param string) (Payload, *protocol.Error) {
	seg, ok := Segment(content)
	if !ok {
		return Payload{}, Unverified(param)
	}
	return s.OpenSegment(seg, param)
}

// OpenSegment opens a content as a segment store keeps it (Segment).
func (s *Sealer) OpenSegment(seg []byte, param string) (Payload, *protocol.Error) {
	bad := Unverified(param)
	if len(seg) < s.aead.NonceSize() {
		return Payload{}, bad
	}
	nonce, sealed := seg[:s.aead.NonceSize()], seg[s.aead.NonceSize():]
	plain, err := s.aead.Open(nil, nonce, sealed, nil)
	if err != nil {
		return Payload{}, bad
	}
	var p Payload
	raw := json.RawMessage(plain)
	if trimmed := bytes.TrimLeft(plain, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		var env envelope
		if protocol.Unmarshal(plain, &env) != nil || env.V != formatRef || !env.Prev.valid() {
			return Payload{}, bad
		}
		p.Prev, raw = env.Prev, env.Items
	}
	items, perr := protocol.DecodeItems(raw, param)
	if perr != nil {
		return Payload{}, bad
	}
	p.Items = items
	return p, nil
}

// valid reports whether r can refer to a segment: a key as Key makes it,
// and counts a window can have.
func (r *Ref) valid() bool {
	if r == nil || r.Items < 0 || r.Span < 1 || len(r.Key) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(r.Key)
	return err == nil
}

// Segment is content as a segment store keeps it: its sealed bytes, the
// base64url of content decoded; false when content is not base64url.
func Segment(content string) ([]byte, bool) {
	seg, err := base64.RawURLEncoding.DecodeString(content)
	return seg, err == nil
}

// Key is the key a segment is kept under: the hex SHA-256 of its bytes, so
// that a segment read back is known to be the one referred to.
func Key(seg []byte) string {
	sum := sha256.Sum256(seg)
	return hex.EncodeToString(sum[:])
}

// Unverified is the error of a content that does not open, or was
// changed since it was sealed, at param.
func Unverified(param string) *protocol.Error {
	return protocol.Invalid(protocol.CodeInvalidEncrypted, param,
		"The encrypted content could not be verified: send compaction items back exactly as /v1/responses/compact returned them, to the server that made them.")
}
