package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tether test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert, key, pool}
}

// issue writes a server certificate for loopback, of serial, signed by
// the CA, and its key, as PEM files.
func (ca *testCA) issue(t *testing.T, serial int64, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// Written whole, then renamed, as a renewal tool does: a reload
	// never reads half a file.
	for file, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kb}} {
		if err := os.WriteFile(file+".new", pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".new", file); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeTLS: with --tls-cert and --tls-key the API listener serves
// HTTPS and WSS, which openai-go uses trusting the certificate's CA; TLS
// below 1.2 is refused; a renewed certificate is served after SIGHUP,
// without a restart.
func TestServeTLS(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.issue(t, 100, certFile, keyFile)
	base, stop := serveInProcess(t, "--tls-cert", certFile, "--tls-key", keyFile)
	defer stop()
	if !strings.HasPrefix(base, "https://127.0.0.1:") {
		t.Fatalf("serve says %q, want https://", base)
	}
	hostport := strings.TrimPrefix(base, "https://")

	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithHTTPClient(httpClient), option.WithMaxRetries(0))
	resp, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "tether-scripted",
		Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("Hello over TLS")}})
	if err != nil || !strings.Contains(resp.OutputText(), "Hello over TLS") {
		t.Fatalf("https: %v %v", resp, err)
	}
	conn, err := client.Responses.Connect(t.Context(), responses.ResponseConnectionOptions{})
	if err != nil {
		t.Fatalf("wss: %v", err)
	}
	err = conn.Create(t.Context(), responses.ResponsesClientEventResponseCreateParam{Model: "tether-scripted", Store: param.NewOpt(false),
		Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfString: param.NewOpt("Hello over WSS")}})
	if err != nil {
		t.Fatal(err)
	}
	final, err := conn.FinalResponse(t.Context())
	conn.Close()
	if err != nil || !strings.Contains(final.OutputText(), "Hello over WSS") {
		t.Fatalf("wss: %v %v", final, err)
	}

	// TLS 1.1 is refused; plain HTTP gets no answer but an error.
	if c, err := tls.Dial("tcp", hostport, &tls.Config{RootCAs: ca.pool, MaxVersion: tls.VersionTLS11}); err == nil {
		c.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}
	if r, err := http.Get("http://" + hostport + "/healthz"); err == nil {
		if r.StatusCode == http.StatusOK {
			t.Error("plain HTTP served on the TLS listener")
		}
		r.Body.Close()
	}

	// Renewed: the files replaced, SIGHUP, and new connections get it.
	ca.issue(t, 101, certFile, keyFile)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := tls.Dial("tcp", hostport, &tls.Config{RootCAs: ca.pool})
		if err != nil {
			t.Fatal(err)
		}
		serial := c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
		c.Close()
		if serial == 101 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still serving certificate %d 10 s after SIGHUP", serial)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
