package seal

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
)

func TestSealOpen(t *testing.T) {
	t.Parallel()
	key := make([]byte, 32)
	s, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	items := protocol.Items{protocol.UserMessage("the window")}
	content, err := s.Seal(Payload{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	got, perr := s.Open(content, "input[0].encrypted_content")
	if perr != nil || len(got.Items) != 1 || got.Prev != nil {
		t.Fatalf("opened %+v, %v", got, perr)
	}
	if m, ok := got.Items[0].(*protocol.Message); !ok || m.Role != protocol.RoleUser {
		t.Fatalf("opened %#v", got.Items[0])
	}
	other, _ := New(nil) // a random key: another server's
	tampered := []byte(content)
	tampered[len(tampered)/2] ^= 'A' ^ 'B'
	for name, c := range map[string]struct {
		s       *Sealer
		content string
	}{"another key": {other, content}, "tampered": {s, string(tampered)}, "not base64": {s, "!!"}, "short": {s, "AA"}} {
		if _, perr := c.s.Open(c.content, "p"); perr == nil || perr.Code != protocol.CodeInvalidEncrypted || perr.Param != "p" {
			t.Errorf("%s: %v, want %s at p", name, perr, protocol.CodeInvalidEncrypted)
		}
	}
	if _, err := New(make([]byte, 7)); err == nil {
		t.Error("a 7-byte key was taken")
	}
}

// TestSealRef: a payload that refers to a segment opens with its
// reference and its own items; the segment it refers to is a content's
// bytes, opened by OpenSegment, and kept under the hex SHA-256 of them.
func TestSealRef(t *testing.T) {
	t.Parallel()
	s, _ := New(nil)
	first, err := s.Seal(Payload{Items: protocol.Items{protocol.UserMessage("the task")}})
	if err != nil {
		t.Fatal(err)
	}
	seg, ok := Segment(first)
	if !ok {
		t.Fatal("a sealed content is not a segment")
	}
	key := Key(seg)
	if len(key) != 64 || strings.Trim(key, "0123456789abcdef") != "" {
		t.Fatalf("key %q: want 64 hex digits", key)
	}
	ref := &Ref{Key: key, Items: 1, Span: 1}
	second, err := s.Seal(Payload{Prev: ref, Items: protocol.Items{protocol.UserMessage("since")}})
	if err != nil {
		t.Fatal(err)
	}
	got, perr := s.Open(second, "p")
	if perr != nil || got.Prev == nil || *got.Prev != *ref || len(got.Items) != 1 {
		t.Fatalf("opened %+v, %v; want the reference %+v and one item", got, perr, ref)
	}
	back, perr := s.OpenSegment(seg, "p")
	if perr != nil || back.Prev != nil || back.Items[0].(*protocol.Message).Content.Text() != "the task" {
		t.Fatalf("the segment opened to %+v, %v", back, perr)
	}
}

// TestOpenFormats: a content sealed in format 1 (a JSON array of items:
// every compaction item made before references, as encoding/json wrote
// it) still opens, whole; a format 2 envelope of another version, or whose
// reference could not be one this package made, does not.
func TestOpenFormats(t *testing.T) {
	t.Parallel()
	s, _ := New(nil)
	sealRaw := func(plain string) string {
		nonce := make([]byte, s.aead.NonceSize())
		rand.Read(nonce)
		return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(plain), nil))
	}
	old, _ := json.Marshal(protocol.Items{protocol.UserMessage("sealed before references")})
	got, perr := s.Open(sealRaw(string(old)), "p")
	if perr != nil || got.Prev != nil || len(got.Items) != 1 || got.Items[0].(*protocol.Message).Content.Text() != "sealed before references" {
		t.Fatalf("a format 1 content opened to %+v, %v", got, perr)
	}
	key := strings.Repeat("ab", 32)
	for name, plain := range map[string]string{
		"version 3":     `{"v":3,"prev":{"key":"` + key + `","items":1,"span":1},"items":[]}`,
		"no reference":  `{"v":2,"items":[]}`,
		"short key":     `{"v":2,"prev":{"key":"abcd","items":1,"span":1},"items":[]}`,
		"not hex":       `{"v":2,"prev":{"key":"` + strings.Repeat("zz", 32) + `","items":1,"span":1},"items":[]}`,
		"no span":       `{"v":2,"prev":{"key":"` + key + `","items":1},"items":[]}`,
		"not items":     `{"v":2,"prev":{"key":"` + key + `","items":1,"span":1},"items":{}}`,
		"neither shape": `"a string"`,
	} {
		if _, perr := s.Open(sealRaw(plain), "p"); perr == nil || perr.Code != protocol.CodeInvalidEncrypted {
			t.Errorf("%s: %v, want %s", name, perr, protocol.CodeInvalidEncrypted)
		}
	}
	if got, perr := s.Open(sealRaw(`{"v":2,"prev":{"key":"`+key+`","items":1,"span":1},"items":[]}`), "p"); perr != nil || got.Prev == nil {
		t.Errorf("a well-formed format 2 content: %+v, %v", got, perr)
	}
}

// FuzzOpenSealed: whatever plaintext a content holds under the right key
// (the key keeps everything else out), Open takes it as one of the two
// formats or refuses it as invalid_encrypted_content, and never panics.
func FuzzOpenSealed(f *testing.F) {
	key := strings.Repeat("ab", 32)
	for _, seed := range []string{
		`[{"type":"message","role":"user","content":"x"}]`,
		`{"v":2,"prev":{"key":"` + key + `","items":1,"span":1},"items":[{"type":"message","role":"user","content":"x"}]}`,
		`{"v":3,"items":[]}`, `{"v":2,"prev":null,"items":[]}`, `[]`, `{}`, ``, `null`,
	} {
		f.Add(seed)
	}
	s, _ := New(make([]byte, 32))
	f.Fuzz(func(t *testing.T, plain string) {
		nonce := make([]byte, s.aead.NonceSize())
		content := base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(plain), nil))
		p, perr := s.Open(content, "p")
		switch {
		case perr != nil && perr.Code != protocol.CodeInvalidEncrypted:
			t.Fatalf("refused with %s", perr.Code)
		case perr == nil && p.Prev != nil && !p.Prev.valid():
			t.Fatalf("opened with a reference no sealer makes: %+v", p.Prev)
		}
	})
}
