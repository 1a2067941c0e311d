package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
)

// certFiles is the certificate serve's listeners present when --tls-cert
// and --tls-key are given: the API's (HTTPS, WSS) and WebTransport's. It
// is read from its files at start and again on every SIGHUP, so that a
// renewed certificate is served without a restart; a pair that no longer
// loads keeps the one there was.
type certFiles struct {
	cert, key string
	cur       atomic.Pointer[tls.Certificate]
}

// loadCertFiles reads the pair a first time.
func loadCertFiles(cert, key string) (*certFiles, error) {
	c := &certFiles{cert: cert, key: key}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *certFiles) load() error {
	pair, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		return err
	}
	c.cur.Store(&pair)
	return nil
}

// config is a server TLS configuration presenting the current
// certificate, TLS 1.2 and later only.
func (c *certFiles) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.cur.Load(), nil
		},
	}
}

// reloadOnHUP reloads the pair on every SIGHUP until ctx ends.
func (c *certFiles) reloadOnHUP(ctx context.Context, log *slog.Logger) {
	onHUP(ctx, func() {
		if err := c.load(); err != nil {
			log.Error("TLS certificate not reloaded: serving the one before", "cert", c.cert, "err", err)
			return
		}
		log.Info("TLS certificate reloaded", "cert", c.cert)
	})
}

// runCertificate makes a self-signed certificate for a load run's servers
// on loopback (--load-tls), writes it and its key to out as PEM
// (tls-cert.pem, tls-key.pem), and returns the servers' flags for them and
// the clients' TLS configuration, which trusts it alone.
func runCertificate(out string) (args []string, clients *tls.Config, err error) {
	cert, err := selfSigned("127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return nil, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	certFile, keyFile := filepath.Join(out, "tls-cert.pem"), filepath.Join(out, "tls-key.pem")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return []string{"--tls-cert", certFile, "--tls-key", keyFile}, &tls.Config{RootCAs: pool}, nil
}
