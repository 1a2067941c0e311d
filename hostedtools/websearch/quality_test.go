package websearch

import (
	"slices"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// rankingQueries are questions a model might search the Go documentation
// with, and the packages that answer them. They were written to judge how
// the corpus is cut into documents and how the index weighs titles; see
// internal/gencorpus.
var rankingQueries = []struct {
	query string
	want  []string
}{
	{"parse a URL query string", []string{"net/url"}},
	{"sort a slice", []string{"sort", "slices"}},
	{"read a file line by line", []string{"bufio", "os"}},
	{"http server graceful shutdown", []string{"net/http"}},
	{"json decode into struct", []string{"encoding/json"}},
	{"sha256 hash of a string", []string{"crypto/sha256"}},
	{"format a time as RFC3339", []string{"time"}},
	{"run a command and capture output", []string{"os/exec"}},
	{"random number", []string{"math/rand", "crypto/rand", "math/rand/v2"}},
	{"context with timeout", []string{"context"}},
	{"atomic counter", []string{"sync/atomic"}},
	{"mutex lock", []string{"sync"}},
	{"convert string to int", []string{"strconv"}},
	{"base64 encode", []string{"encoding/base64"}},
	{"regular expression match", []string{"regexp"}},
	{"append to slice", []string{"builtin", "slices"}},
	{"gzip compress", []string{"compress/gzip"}},
	{"environment variable", []string{"os"}},
	{"walk a directory tree", []string{"path/filepath", "io/fs"}},
	{"wait for goroutines to finish", []string{"sync"}},
	{"split a string by separator", []string{"strings"}},
	{"write csv file", []string{"encoding/csv"}},
	{"template execute html escaping", []string{"html/template"}},
	{"set http request header", []string{"net/http"}},
	{"measure elapsed time duration", []string{"time"}},
	{"structured logging", []string{"log/slog"}},
	{"compare byte slices", []string{"bytes"}},
	{"trim whitespace from string", []string{"strings"}},
	{"create temporary file", []string{"os"}},
	{"listen on tcp port", []string{"net"}},
	{"parse command line flags", []string{"flag"}},
	{"length of a map", []string{"builtin"}},
	{"unicode rune is letter", []string{"unicode"}},
	{"generate random UUID bytes", []string{"crypto/rand"}},
	{"test http handler recorder", []string{"net/http/httptest"}},
	{"deep equal comparison", []string{"reflect"}},
	{"read all bytes from reader", []string{"io"}},
	{"big integer arithmetic", []string{"math/big"}},
	{"signal handling ctrl-c interrupt", []string{"os/signal"}},
	{"ParseQuery", []string{"net/url"}},
	{"encode struct to xml", []string{"encoding/xml"}},
	{"open sqlite database query rows", []string{"database/sql"}},
	{"decode png image", []string{"image/png"}},
	{"send email smtp", []string{"net/smtp"}},
	{"resolve hostname to ip address", []string{"net"}},
	{"parse ip address prefix", []string{"net/netip"}},
	{"cookie jar for http client", []string{"net/http/cookiejar"}},
	{"reverse proxy", []string{"net/http/httputil"}},
	{"profile cpu usage", []string{"runtime/pprof"}},
	{"number of goroutines", []string{"runtime"}},
	{"hex encode bytes", []string{"encoding/hex"}},
	{"read zip archive", []string{"archive/zip"}},
	{"tar archive write", []string{"archive/tar"}},
	{"crc32 checksum", []string{"hash/crc32"}},
	{"hmac signature verify", []string{"crypto/hmac"}},
	{"aes gcm encryption", []string{"crypto/cipher", "crypto/aes"}},
	{"rsa sign message", []string{"crypto/rsa"}},
	{"x509 certificate parse pem", []string{"crypto/x509", "encoding/pem"}},
	{"min heap priority queue", []string{"container/heap"}},
	{"doubly linked list", []string{"container/list"}},
	{"tab aligned columns text", []string{"text/tabwriter"}},
	{"parse go source file ast", []string{"go/parser", "go/ast"}},
	{"format go source code", []string{"go/format"}},
	{"mime type of file extension", []string{"mime"}},
	{"multipart form upload", []string{"mime/multipart"}},
	{"escape html special characters", []string{"html"}},
	{"utf8 decode rune", []string{"unicode/utf8"}},
	{"string builder efficient concatenation", []string{"strings"}},
	{"copy file contents", []string{"io", "os"}},
	{"iterate over map keys sorted", []string{"maps", "slices"}},
	{"error wrapping unwrap", []string{"errors"}},
	{"check if error is of type", []string{"errors"}},
	{"run function once", []string{"sync"}},
	{"sleep for a second", []string{"time"}},
	{"ticker periodic", []string{"time"}},
	{"absolute value float", []string{"math"}},
	{"square root", []string{"math"}},
	{"http get request", []string{"net/http"}},
	{"url path join", []string{"net/url", "path"}},
	{"exit program with status code", []string{"os"}},
}

// TestIndexRankingQuality guards the ranking as a whole: a change to the
// analyzer, the boosts or the corpus generator must not make the default
// corpus answer worse. With the Go 1.26 corpus, 65 of the 80 queries rank an
// expected package first, 75 in the top three, mean reciprocal rank 0.87.
// The bounds leave room for a new Go release's documentation.
func TestIndexRankingQuality(t *testing.T) {
	t.Parallel()
	ix := stdlibIndex(t)
	var top3 int
	var rr float64
	for _, q := range rankingQueries {
		got := search(t, ix, q.query, 5)
		rank := slices.IndexFunc(got, func(s protocol.WebSearchSource) bool {
			return slices.Contains(q.want, stdlibPackage(s.URL))
		}) + 1
		switch {
		case rank == 0:
			t.Logf("%q: none of %v in %v", q.query, q.want, urls(got))
		case rank > 1:
			t.Logf("%q: rank %d in %v", q.query, rank, urls(got))
		}
		if rank >= 1 {
			rr += 1 / float64(rank)
		}
		if rank >= 1 && rank <= 3 {
			top3++
		}
	}
	n := len(rankingQueries)
	mrr := rr / float64(n)
	t.Logf("top 3: %d of %d; mean reciprocal rank %.3f", top3, n, mrr)
	if top3 < n*85/100 || mrr < 0.78 {
		t.Errorf("ranking regressed: top 3 %d of %d (want >= %d), mean reciprocal rank %.3f (want >= 0.78)", top3, n, n*85/100, mrr)
	}
}
