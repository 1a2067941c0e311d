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
	"errors"
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
// way the session is authenticated as it opens, before any frame; a
// secret authenticates nothing else (a plain HTTP request that bears one
// is refused). The secret is checked as the request is authenticated, and
// spent only once the handshake is accepted (spendSecret): a handshake
// refused before that (its origin, a connection limit, shutdown) leaves it
// for another try. Its use is recorded (in the store when it is a
// OnceStore, so that no server of those sharing it takes it twice; else in
// usedSecrets, bounded by Limits.MaxClientSecrets); it is never logged nor
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

// clientSecrets mints, checks and spends client secrets.
type clientSecrets struct {
	key  []byte
	once OnceStore // nil: the uses are recorded here, for this server

	mu   lockrank.Mutex[lockrank.Secrets]
	used *usedSecrets // guarded by mu; without a OnceStore
}

// newClientSecrets signs with key (nil: a random one) and records uses in
// store when it is a OnceStore, else in a set of at most maxUsed.
func newClientSecrets(key []byte, store Store, maxUsed int) *clientSecrets {
	if len(key) == 0 {
		key = make([]byte, 32)
		rand.Read(key)
	}
	cs := &clientSecrets{key: key, used: newUsedSecrets(maxUsed)}
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

// presented is a client secret that has been checked and not yet spent.
type presented struct {
	tenant   string
	nonce    secretNonce
	nonceHex string // as minted: the OnceStore's key
	exp      int64  // Unix seconds
}

// check is what secret, presented from origin at now, says; false when it
// is not one this server signed, has expired, or is bound to another
// origin. Whether it was used is for spend to find out.
func (cs *clientSecrets) check(secret, origin string, now time.Time) (presented, bool) {
	payload, sig, ok := strings.Cut(strings.TrimPrefix(secret, secretPrefix), ".")
	if !ok || !strings.HasPrefix(secret, secretPrefix) {
		return presented{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || subtle.ConstantTimeCompare(got, cs.sign(payload)) != 1 {
		return presented{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	var c secretClaims
	if err != nil || json.Unmarshal(raw, &c) != nil {
		return presented{}, false
	}
	p := presented{tenant: c.Tenant, nonceHex: c.Nonce, exp: c.Expires}
	n, err := hex.DecodeString(c.Nonce)
	if err != nil || len(n) != len(p.nonce) {
		return presented{}, false
	}
	copy(p.nonce[:], n)
	if !now.Before(time.Unix(c.Expires, 0)) || c.Origin != "" && c.Origin != origin {
		return presented{}, false
	}
	return p, true
}

// spend takes p's one use at now, or says why it cannot: it was used (401
// invalid_api_key, as any secret not valid), or this server's set of used
// secrets is full (503 too_many_client_secrets).
func (cs *clientSecrets) spend(ctx context.Context, p presented, now time.Time) *protocol.Error {
	var err error
	if cs.once != nil {
		first, serr := cs.once.UseOnce(ctx, "client_secret:"+p.nonceHex, time.Unix(p.exp, 0))
		if serr != nil || !first {
			err = errSecretUsed
		}
	} else {
		cs.mu.Lock()
		err = cs.used.use(p.nonce, p.exp, now.Unix())
		cs.mu.Unlock()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errUsedSecretsFull):
		return protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeTooManyClientSecrets, "",
			"This server remembers as many used client secrets as it may (--max-client-secrets) until some expire, within 10 minutes: retry then, with this secret if it is still unexpired.")
	}
	return errSecretNotValid()
}

// errSecretNotValid refuses a client secret: any reason, told the same.
func errSecretNotValid() *protocol.Error {
	return protocol.Errorf(http.StatusUnauthorized, protocol.CodeInvalidAPIKey, "", "%s",
		"The client secret is not valid: expired, used already, for another origin, or not this server's. Ask POST /v1/client_secrets for another.")
}

type presentedKey struct{}

// withPresented is ctx carrying p, the secret its request was admitted
// with, to be spent as its handshake is accepted.
func withPresented(ctx context.Context, p presented) context.Context {
	return context.WithValue(ctx, presentedKey{}, p)
}

// spendSecret takes the one use of the client secret r was admitted with,
// if any (nil when it was admitted with a key, or without keys): the
// session's handshake calls it once nothing else can refuse it. The
// error is the handshake's answer.
func (s *Server) spendSecret(r *http.Request) *protocol.Error {
	p, ok := r.Context().Value(presentedKey{}).(presented)
	if !ok {
		return nil
	}
	return s.secrets.spend(r.Context(), p, s.now())
}

// presentedSecret is the client secret r presents, if any, when r opens a
// session: a WebSocket upgrade of /v1/responses that offers the secret as
// a subprotocol, or a WebTransport CONNECT to /v1/responses with the
// client_secret query parameter. Such requests reach the session's
// handshake alone, which spends the secret; any other request is not
// authenticated by one (secretMisplaced).
func presentedSecret(r *http.Request) string {
	if r.URL.Path != "/v1/responses" {
		return ""
	}
	switch {
	case r.Method == http.MethodConnect && (r.Proto == "webtransport-h3" || r.Proto == "webtransport"):
		// The extended CONNECT's :protocol, as http3 sets it: the
		// draft's name, and the one before it (which webtransport-go
		// still takes).
		return r.URL.Query().Get("client_secret")
	case r.Method == http.MethodGet && isWebSocketUpgrade(r):
		return secretSubprotocolValue(r)
	}
	return ""
}

// secretSubprotocolValue is the client secret offered as a WebSocket
// subprotocol in r, if any.
func secretSubprotocolValue(r *http.Request) string {
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(h, ",") {
			if s, ok := strings.CutPrefix(strings.TrimSpace(p), secretSubprotocol); ok {
				return s
			}
		}
	}
	return ""
}

// secretMisplaced reports whether r, which opens no session, bears a
// client secret anyway: as a subprotocol, a client_secret parameter, or a
// bearer token. Its 401 then says where a secret goes.
func secretMisplaced(r *http.Request) bool {
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return secretSubprotocolValue(r) != "" || r.URL.Query().Has("client_secret") ||
		strings.HasPrefix(strings.TrimSpace(bearer), secretPrefix)
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
