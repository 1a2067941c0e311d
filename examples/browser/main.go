// Command browser serves a page that runs a suspended rollout over
// WebTransport from JavaScript, with a client tool implemented in the page.
//
// Start tether with WebTransport, allowing the page's origin:
//
//	tether serve --wt-addr 127.0.0.1:8443 --origin '127.0.0.1:*'
//
// It prints "webtransport on https://127.0.0.1:8443 sha256=HEX". Then:
//
//	go run ./examples/browser -url https://127.0.0.1:8443/v1 -hash HEX
//
// and open the address it prints in Chrome (or Firefox 125+). The page
// pins tether's self-signed certificate by that hash
// (serverCertificateHashes), so no certificate needs installing. When the
// rollout ends the page reports to this server, which prints the result;
// -once makes it exit then (the example's test drives it so, in headless
// Chromium).
//
// Against a tether that requires API keys (serve --api-keys), give its
// HTTP address and a key: -api http://127.0.0.1:8080/v1 -api-key KEY. This
// server, the page's backend, keeps the key; for each page it serves it
// asks tether for a client secret (POST /v1/client_secrets) bound to the
// page's origin, which the page uses once, as it opens its WebTransport
// session.
package main

import (
	"bytes"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
)

//go:embed index.html
var page string

func main() {
	url := flag.String("url", "https://127.0.0.1:8443/v1", "tether's WebTransport base URL, as tether serve prints it")
	hash := flag.String("hash", "", "the SHA-256 (hex) of tether's certificate, as tether serve prints it")
	addr := flag.String("addr", "127.0.0.1:0", "address to serve the page on")
	once := flag.Bool("once", false, "exit when the page has reported its result (0 if the rollout completed and its tool ran)")
	api := flag.String("api", "", "tether's HTTP base URL (http://HOST:PORT/v1), to mint the page a client secret with -api-key")
	apiKey := flag.String("api-key", "", "an API key of tether's (serve --api-keys): the page gets a client secret made with it, never the key")
	flag.Parse()
	switch h, err := hex.DecodeString(*hash); {
	case *hash == "":
		fail("give -hash, the certificate hash tether serve printed")
	case err != nil || len(h) != 32:
		fail(fmt.Sprintf("-hash %q: want the 64 hex digits of a SHA-256, as tether serve prints it", *hash))
	case !strings.HasPrefix(*url, "https://"):
		fail(fmt.Sprintf("-url %q: want tether's WebTransport address, https://HOST:PORT/v1", *url))
	case (*api == "") != (*apiKey == ""):
		fail("-api and -api-key go together")
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fail(err.Error())
	}
	origin := "http://" + ln.Addr().String()
	exit := make(chan int, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		cfg := map[string]string{"url": strings.TrimSuffix(*url, "/") + "/responses", "hash": *hash}
		if *apiKey != "" {
			secret, err := clientSecret(*api, *apiKey, origin)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			cfg["secret"] = secret
		}
		b, _ := json.Marshal(cfg)
		start, end := strings.Index(page, "/*CONFIG*/"), strings.Index(page, "/*END*/")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store") // a secret serves once
		io.WriteString(w, page[:start]+string(b)+page[end+len("/*END*/"):])
	})
	mux.HandleFunc("POST /report", func(w http.ResponseWriter, r *http.Request) {
		var res struct {
			Status   string `json:"status"`
			Text     string `json:"text"`
			ToolRuns int    `json:"toolRuns"`
			Error    string `json:"error"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&res); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Printf("page reported: status %s, the page's tool ran %d times, answer %q %s\n", res.Status, res.ToolRuns, res.Text, res.Error)
		code := 1
		if res.Status == "completed" && res.ToolRuns > 0 {
			code = 0
		}
		select {
		case exit <- code:
		default:
		}
	})
	fmt.Printf("open http://%s/\n", ln.Addr())
	go http.Serve(ln, mux)
	if !*once {
		select {}
	}
	os.Exit(<-exit)
}

// clientSecret asks tether at api, with key, for a client secret that a
// page of origin may use once.
func clientSecret(api, key, origin string) (string, error) {
	body, _ := json.Marshal(map[string]any{"origin": origin, "expires_after": map[string]int{"seconds": 60}})
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(api, "/")+"/client_secrets", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Value string `json:"value"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", fmt.Errorf("client secret: %s: %v", resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := resp.Status
		if out.Error != nil {
			msg += ": " + out.Error.Message
		}
		return "", fmt.Errorf("client secret: %s", msg)
	}
	return out.Value, nil
}

// fail reports a bad argument or a failure in one line and exits 1.
func fail(msg string) {
	fmt.Fprintln(os.Stderr, "browser:", msg)
	os.Exit(1)
}
