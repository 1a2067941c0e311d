package seal

import (
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
	content, err := s.Seal(items)
	if err != nil {
		t.Fatal(err)
	}
	got, perr := s.Open(content, "input[0].encrypted_content")
	if perr != nil || len(got) != 1 {
		t.Fatalf("opened %v, %v", got, perr)
	}
	if m, ok := got[0].(*protocol.Message); !ok || m.Role != protocol.RoleUser {
		t.Fatalf("opened %#v", got[0])
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
