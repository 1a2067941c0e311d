package main

import (
	"context"
	"crypto/tls"
	"log/slog"
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
