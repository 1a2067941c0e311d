package webtransport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"time"
)

// MaxCertificateHashValidity is the longest validity a certificate may
// have for browsers to accept it by its hash (WebTransport's
// serverCertificateHashes): under 14 days.
const MaxCertificateHashValidity = 14*24*time.Hour - time.Minute

// SelfSignedCertificate makes a certificate for hosts (names or IP
// addresses) that browsers accept by its hash: X.509v3, an ECDSA P-256 key,
// valid from a minute ago for validFor, which must be under 14 days. Pin it
// with CertificateHash.
func SelfSignedCertificate(validFor time.Duration, hosts ...string) (tls.Certificate, error) {
	if validFor <= 0 || validFor > MaxCertificateHashValidity {
		return tls.Certificate{}, fmt.Errorf("webtransport: a certificate pinned by hash must be valid for under 14 days, not %s", validFor)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	notBefore := time.Now().Add(-time.Minute)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "tether"},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(validFor),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// CertificateHash is the SHA-256 of cert's leaf certificate, as browsers
// (serverCertificateHashes) and clients (clienttools.Client.CertHash) pin it.
func CertificateHash(cert tls.Certificate) [32]byte {
	if len(cert.Certificate) == 0 {
		return [32]byte{}
	}
	return sha256.Sum256(cert.Certificate[0])
}
