// Package seal seals the items a context compaction replaces into the
// compaction item's encrypted_content, and opens them again: clients
// cannot read or forge a window, and only a server with the same key opens
// it.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
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

// Seal encrypts items into the content of a compaction item.
func (s *Sealer) Seal(items protocol.Items) (string, error) {
	plain, err := json.Marshal(items)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, nil)), nil
}

// Open decrypts the content Seal made back into its items; content that is
// not that, or was sealed under another key, is refused as invalid at
// param.
func (s *Sealer) Open(content, param string) (protocol.Items, *protocol.Error) {
	bad := protocol.Invalid(protocol.CodeInvalidEncrypted, param,
		"The encrypted content could not be verified: send compaction items back exactly as /v1/responses/compact returned them, to the server that made them.")
	raw, err := base64.RawURLEncoding.DecodeString(content)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return nil, bad
	}
	nonce, sealed := raw[:s.aead.NonceSize()], raw[s.aead.NonceSize():]
	plain, err := s.aead.Open(nil, nonce, sealed, nil)
	if err != nil {
		return nil, bad
	}
	items, perr := protocol.DecodeItems(plain, param)
	if perr != nil {
		return nil, bad
	}
	return items, nil
}
