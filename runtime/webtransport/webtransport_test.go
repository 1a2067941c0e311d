package webtransport_test

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/webtransport"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}

// TestListenCloseAtOnce: an endpoint closed as soon as it is made closes
// cleanly. It guards against the race between webtransport-go's own Serve
// and Close that Listen avoids.
func TestListenCloseAtOnce(t *testing.T) {
	t.Parallel()
	srv, err := runtime.NewServer(runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := webtransport.SelfSignedCertificate(time.Hour, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		wt, err := webtransport.Listen(srv, "127.0.0.1:0", cert)
		if err != nil {
			t.Fatal(err)
		}
		if err := wt.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSelfSignedCertificate: the certificate is one browsers take by its
// hash (valid under 14 days, for the hosts asked), and the endpoint pins
// the same hash CertificateHash gives.
func TestSelfSignedCertificate(t *testing.T) {
	t.Parallel()
	if _, err := webtransport.SelfSignedCertificate(14*24*time.Hour, "127.0.0.1"); err == nil {
		t.Error("a certificate valid for 14 days was made; browsers refuse it by hash")
	}
	cert, err := webtransport.SelfSignedCertificate(webtransport.MaxCertificateHashValidity, "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
	if err := leaf.VerifyHostname("localhost"); err != nil {
		t.Error(err)
	}
	if d := leaf.NotAfter.Sub(leaf.NotBefore); d >= 14*24*time.Hour {
		t.Errorf("valid for %s, want under 14 days", d)
	}
	want := sha256.Sum256(cert.Certificate[0])
	if got := webtransport.CertificateHash(cert); got != want {
		t.Errorf("CertificateHash = %x, want %x", got, want)
	}
	srv, err := runtime.NewServer(runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wt, err := webtransport.Listen(srv, "127.0.0.1:0", cert)
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Close()
	if got := wt.CertificateHash(); got != hex.EncodeToString(want[:]) {
		t.Errorf("endpoint's hash %s, want %x", got, want)
	}
}
