package flushers

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"testing"
	"time"
)

// TestTryWriteTLS: over a real TLS connection on loopback whose peer does
// not read yet, a try seals all it is given and writes what the socket
// takes, without waiting, and reports blocked; a second try seals after
// the records waiting. What waits goes out first with the next write that
// waits, Finish or the connection's own Write, and the peer reads every
// byte in order. A closed connection takes nothing.
func TestTryWriteTLS(t *testing.T) {
	for _, finish := range []string{"Finish", "Write"} {
		t.Run(finish, func(t *testing.T) {
			server, client := tlsLoopback(t)
			sock := NewSocket(server)
			if sock == nil {
				t.Fatal("a TLS connection over Listener's has no socket to try")
			}
			p := pattern(32<<20, 7) // far more than a loopback socket's buffers
			q := pattern(1000, 3)
			r := pattern(5000, 5)
			start := time.Now()
			if n, blocked := sock.TryWrite(p); n != len(p) || !blocked {
				t.Fatalf("a try of %d bytes to a peer not reading sealed %d (blocked %v), want all of it, blocked", len(p), n, blocked)
			}
			if n, blocked := sock.TryWrite(q); n != len(q) || !blocked {
				t.Fatalf("a second try of %d bytes sealed %d (blocked %v), want all of it, blocked", len(q), n, blocked)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("the tries waited %v", d) // bounds a wait for the peer (which never reads until below), not a timing
			}
			read := readAll(client)
			if finish == "Finish" {
				if err := sock.Finish(); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := server.Write(r); err != nil {
				t.Fatal(err)
			}
			if err := sock.Finish(); err != nil {
				t.Fatalf("finishing with nothing waiting: %v", err)
			}
			server.Close()
			want := append(append(append([]byte(nil), p...), q...), r...)
			if got := <-read; !bytes.Equal(got, want) {
				t.Fatalf("the peer read %d bytes, not the %d written in order", len(got), len(want))
			}
			if n, blocked := sock.TryWrite(q); n != 0 || !blocked {
				t.Fatalf("a closed connection took %d bytes (blocked %v)", n, blocked)
			}
		})
	}
}

// TestTLSOverAnotherListener: a TLS connection over a listener other than
// Listener's has no socket to try; its writes wait, as they always did.
func TestTLSOverAnotherListener(t *testing.T) {
	server, _ := loopback(t)
	if sock := NewSocket(tls.Server(server, &tls.Config{})); sock != nil {
		t.Fatal("a TLS connection over a plain listener's gave a socket to try")
	}
}

func pattern(n int, mul byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i) * mul
	}
	return p
}

// tlsLoopback returns the two ends of a TLS connection on loopback, the
// server's accepted by Listener, both handshaken, closed when the test
// ends.
func tlsLoopback(t *testing.T) (server, client *tls.Conn) {
	t.Helper()
	cert, pool := selfSigned(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tl := tls.NewListener(Listener(ln), &tls.Config{Certificates: []tls.Certificate{cert}})
	accepted := make(chan *tls.Conn, 1)
	go func() {
		c, err := tl.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		tc := c.(*tls.Conn)
		if tc.Handshake() != nil {
			tc.Close()
			tc = nil
		}
		accepted <- tc
	}()
	client, err = tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if server = <-accepted; server == nil {
		t.Fatal("accept or handshake failed")
	}
	t.Cleanup(func() { server.Close() })
	return server, client
}

// selfSigned returns a certificate for localhost and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
