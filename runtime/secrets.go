package runtime

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// Client secrets let a browser connect to a server that requires API keys:
// a page cannot set Authorization on a WebSocket or a WebTransport session,
// and must not hold a key. The page's own backend, which holds the key,
// asks POST /v1/client_secrets for a secret: short-lived, usable once, bound
// to the key's tenant and, when asked, to the page's origin, signed with
// HMAC-SHA256 (Options.SecretKey; servers sharing a store share it). The
// page hands it over where a browser can: as the WebSocket subprotocol
// "openai-insecure-api-key.SECRET" beside one the server selects ("json"
// or "msgpack"; a browser fails a handshake whose offered subprotocols got
// no answer), as OpenAI's own browser clients do with ephemeral keys; or
// as the query parameter "client_secret" of the WebTransport URL. Either
// way the session is authenticated as it opens, before any frame. A
// secret's use is recorded (in the store when it is a OnceStore, so that
// no server of those sharing it takes it twice); it is never logged nor
// echoed (the subprotocol is not selected back).

// secretPrefix begins every client secret.
const secretPrefix = "ek_"

// secretSubprotocol prefixes a client secret given as a WebSocket
// subprotocol.
const secretSubprotocol = "openai-insecure-api-key."

// The life of a client secret: asked for in seconds, up to the most.
const (
	defaultSecretLife = time.Minute
	maxSecretLife     = 10 * time.Minute
)

// OnceStore is a Store that records a client secret's use for all the
// servers sharing it (package redisstore): UseOnce reports whether id was
// unused, and marks it used until until.
type OnceStore interface {
	UseOnce(ctx context.Context, id string, until time.Time) (first bool, err error)
}

// secretClaims are what a client secret says.
type secretClaims struct {
	Tenant  string `json:"t"`
	Origin  string `json:"o,omitempty"` // "" for any
	Expires int64  `json:"e"`           // Unix seconds
	Nonce   string `json:"n"`
}

// clientSecrets mints and redeems client secrets.
type clientSecrets struct {
	key  []byte
	once OnceStore // nil: the uses are recorded here, for this server

	mu   lockrank.Mutex[lockrank.Secrets]
	used map[string]time.Time // nonce -> expiry, without a OnceStore
}

func newClientSecrets(key []byte, store Store) *clientSecrets {
	if len(key) == 0 {
		key = make([]byte, 32)
		rand.Read(key)
	}
	cs := &clientSecrets{key: key, used: map[string]time.Time{}}
	if o, ok := store.(OnceStore); ok {
		cs.once = o
	}
	return cs
}

// mint is a client secret for tenant, origin ("" for any), until exp.
func (cs *clientSecrets) mint(tenant, origin string, exp time.Time) string {
	nonce := make([]byte, 16)
	rand.Read(nonce)
	claims, _ := json.Marshal(secretClaims{Tenant: tenant, Origin: origin, Expires: exp.Unix(), Nonce: hex.EncodeToString(nonce)})
	payload := base64.RawURLEncoding.EncodeToString(claims)
	return secretPrefix + payload + "." + base64.RawURLEncoding.EncodeToString(cs.sign(payload))
}

func (cs *clientSecrets) sign(payload string) []byte {
	m := hmac.New(sha256.New, cs.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// redeem is the tenant of secret, presented from origin at now, taking
// its one use; false when it is not one this server signed, has expired,
// is bound to another origin, or was used.
func (cs *clientSecrets) redeem(ctx context.Context, secret, origin string, now time.Time) (string, bool) {
	payload, sig, ok := strings.Cut(strings.TrimPrefix(secret, secretPrefix), ".")
	if !ok || !strings.HasPrefix(secret, secretPrefix) {
		return "", false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || subtle.ConstantTimeCompare(got, cs.sign(payload)) != 1 {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	var c secretClaims
	if err != nil || json.Unmarshal(raw, &c) != nil || c.Nonce == "" {
		return "", false
	}
	exp := time.Unix(c.Expires, 0)
	if !now.Before(exp) || c.Origin != "" && c.Origin != origin {
		return "", false
	}
	if cs.once != nil {
		first, err := cs.once.UseOnce(ctx, "client_secret:"+c.Nonce, exp)
		return c.Tenant, err == nil && first
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for n, until := range cs.used { // those past their expiry cannot be used anyway
		if !now.Before(until) {
			delete(cs.used, n)
		}
	}
	if _, used := cs.used[c.Nonce]; used {
		return "", false
	}
	cs.used[c.Nonce] = exp
	return c.Tenant, true
}

// presentedSecret is the client secret r presents, if any: as a WebSocket
// subprotocol, or the client_secret query parameter of a WebTransport
// CONNECT. Only the endpoint of sessions takes one.
func presentedSecret(r *http.Request) string {
	if r.URL.Path != "/v1/responses" {
		return ""
	}
	if r.Method == http.MethodConnect {
		return r.URL.Query().Get("client_secret")
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(h, ",") {
			if s, ok := strings.CutPrefix(strings.TrimSpace(p), secretSubprotocol); ok {
				return s
			}
		}
	}
	return ""
}

// handleClientSecret serves POST /v1/client_secrets: a client secret for
// the key's tenant. The body, optional: {"expires_after": {"seconds": N}}
// (60 by default, 600 at most) and "origin" (the page's, such as
// "https://app.example.com", which alone may then use it).
func (s *Server) handleClientSecret(w http.ResponseWriter, r *http.Request) {
	body, perr := s.readBody(w, r)
	if perr != nil {
		writeError(w, perr)
		return
	}
	var req struct {
		ExpiresAfter *struct {
			Seconds int `json:"seconds"`
		} `json:"expires_after"`
		Origin string `json:"origin"`
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := protocol.Unmarshal(body, &req); err != nil {
			writeError(w, protocol.Invalid(protocol.CodeInvalidJSON, "", "Invalid body: %v.", err))
			return
		}
	}
	life := defaultSecretLife
	if req.ExpiresAfter != nil {
		life = time.Duration(req.ExpiresAfter.Seconds) * time.Second
		if life <= 0 || life > maxSecretLife {
			writeError(w, protocol.Invalid(protocol.CodeInvalidValue, "expires_after.seconds",
				"Invalid 'expires_after.seconds': a client secret lives 1 to %d seconds.", int(maxSecretLife/time.Second)))
			return
		}
	}
	exp := s.now().Add(life)
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "client_secret", "value": s.secrets.mint(Tenant(r.Context()), req.Origin, exp), "expires_at": exp.Unix(),
	})
}
