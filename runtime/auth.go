package runtime

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/tether-run/tether/protocol"
)

// Keys are the API keys a server accepts, each with its tenant's name. A
// server with Keys refuses every request but GET /healthz without a valid
// "Authorization: Bearer KEY" (the WebSocket upgrade included; a session's
// handshake may present a client secret instead, secrets.go) with 401
// invalid_api_key. Keys compare in constant time (their SHA-256 sums, so
// that neither a key's length nor its prefix leaks), and are never logged.
// Store swaps the whole set at once (a reload): requests in flight keep the
// tenant they were admitted with.
type Keys struct {
	set atomic.Pointer[[]keyEntry]
}

type keyEntry struct {
	sum    [sha256.Size]byte
	tenant string
}

// ParseKeys reads a key file: one "KEY TENANT" per line (the tenant is the
// key's name when it is missing), blank lines and "#" comments ignored.
func ParseKeys(r io.Reader) (map[string]string, error) {
	keys := map[string]string{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Fields(text)
		if len(f) > 2 {
			return nil, fmt.Errorf("line %d: want KEY [TENANT], got %d fields", line, len(f))
		}
		tenant := fmt.Sprintf("line%d", line) // never a part of the key: tenants are logged
		if len(f) == 2 {
			tenant = f[1]
		}
		if _, dup := keys[f[0]]; dup {
			return nil, fmt.Errorf("line %d: a key given twice", line)
		}
		keys[f[0]] = tenant
	}
	return keys, sc.Err()
}

// Store makes keys (key -> tenant) the accepted set.
func (k *Keys) Store(keys map[string]string) {
	set := make([]keyEntry, 0, len(keys))
	for key, tenant := range keys {
		set = append(set, keyEntry{sha256.Sum256([]byte(key)), tenant})
	}
	k.set.Store(&set)
}

// Len is how many keys are accepted.
func (k *Keys) Len() int {
	if set := k.set.Load(); set != nil {
		return len(*set)
	}
	return 0
}

// tenant is the tenant of the request's bearer key, and whether it has
// one that is accepted. Every key is compared, so the time taken does not
// say which matched.
func (k *Keys) tenant(r *http.Request) (string, bool) {
	set := k.set.Load()
	if set == nil {
		return "", false
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "", false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(key)))
	tenant, found := "", 0
	for _, e := range *set {
		if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
			tenant, found = e.tenant, 1
		}
	}
	return tenant, found == 1
}

type tenantKey struct{}

// Tenant is the tenant of an authenticated request's context, "" when the
// server has no keys.
func Tenant(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// WithTenant is ctx carrying tenant: for work that outlives its request (a
// WebSocket session, a rollout's store write), and for a Store's own tests,
// whose calls act for the tenant of their context.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// authenticate admits r or answers 401. A client secret r presents is
// checked here and spent by the handshake it opens (spendSecret).
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	k := s.opts.Keys
	if k == nil || r.URL.Path == "/healthz" {
		return r, true
	}
	tenant, ok := k.tenant(r)
	if secret := presentedSecret(r); !ok && secret != "" {
		p, valid := s.secrets.check(secret, r.Header.Get("Origin"), s.now())
		if !valid {
			writeError(w, errSecretNotValid())
			return r, false
		}
		// Spent as the handshake is accepted, not here: one refused on
		// its way (its origin, a limit) leaves the secret for another try.
		tenant, ok = p.tenant, true
		r = r.WithContext(withPresented(r.Context(), p))
	}
	if !ok {
		msg := `Incorrect API key provided. Send "Authorization: Bearer KEY" with a key this server was given.`
		switch {
		case secretMisplaced(r):
			msg = `A client secret opens only the session it was minted for: a WebSocket (as the subprotocol "openai-insecure-api-key.SECRET") or a WebTransport connection (as ?client_secret=SECRET) to /v1/responses. Send "Authorization: Bearer KEY" for anything else.`
		case r.Header.Get("Authorization") == "":
			msg = `You didn't provide an API key. Send "Authorization: Bearer KEY" with a key this server was given.`
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="tether"`)
		writeError(w, protocol.Errorf(http.StatusUnauthorized, protocol.CodeInvalidAPIKey, "", "%s", msg))
		return r, false
	}
	if perr := s.admission.Request(tenant); perr != nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, perr)
		return r, false
	}
	return r.WithContext(WithTenant(r.Context(), tenant)), true
}
