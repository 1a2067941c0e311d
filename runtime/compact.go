package runtime

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/tether-run/tether/protocol"
)

// sealer seals compacted items into a compaction item's encrypted_content
// (AES-256-GCM, base64url) and opens them again. Clients cannot read or forge
// the window; only the server that sealed it (or one sharing its key) opens it.
type sealer struct {
	aead cipher.AEAD
}

func newSealer(key []byte) (*sealer, error) {
	if key == nil {
		key = make([]byte, 32)
		rand.Read(key)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("runtime: compaction key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(items protocol.Items) (string, error) {
	plain, err := json.Marshal(items)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, nil)), nil
}

func (s *sealer) open(content, param string) (protocol.Items, *protocol.Error) {
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
