package app

// The Endpoint Picker's listener (epp.listen): llmgw's router answering a
// proxy in front over ext_proc (internal/router/epp), on a gRPC server
// held to the API listener's deadlines.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"gitea.mynodes.xyz/ilker/llmgw/internal/h1"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/epp"
)

// eppMessageSlack is what an ext_proc message carries beyond a body
// chunk: its headers, metadata and framing.
const eppMessageSlack = 64 << 10

// eppListener is the EPP's listener, server and gRPC server; the zero
// value is off.
type eppListener struct {
	ln   net.Listener
	srv  *epp.Server
	grpc *grpc.Server
}

// openEPP opens the EPP's listener when epp.listen is set.
func (g *Gateway) openEPP() error {
	addr := g.cfg.EPP.Listen
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("EPP listener: %w", err)
	}
	s := g.cfg.Server
	g.epp.ln = ln
	g.epp.srv = epp.New(epp.Options{Router: g.router, MaxBodyBytes: s.MaxBodyBytes, BodyTimeout: s.BodyTimeout, Fallbacks: s.Retries, Logger: g.log})
	d := h1.Deadlines{Header: apiReadHeaderTimeout, Body: s.BodyTimeout, Idle: apiIdleTimeout}
	var opts []grpc.ServerOption
	if g.cfg.EPP.TLS {
		cert, err := selfSigned(time.Now())
		if err != nil {
			return fmt.Errorf("EPP listener: %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	}
	g.epp.grpc = h1.NewGRPCServer(h1.GRPC{Deadlines: d, MaxMessage: int(min(s.MaxBodyBytes, 1<<30)) + eppMessageSlack}, opts...)
	g.epp.srv.Register(g.epp.grpc)
	return nil
}

// EPPAddr is the EPP listener's host:port; empty when it is off.
func (g *Gateway) EPPAddr() string {
	if g.epp.ln == nil {
		return ""
	}
	return hostPort(g.epp.ln.Addr())
}

// serveEPP serves the EPP until stopEPP; nil when it is off.
func (g *Gateway) serveEPP() error {
	if g.epp.ln == nil {
		return nil
	}
	return g.epp.grpc.Serve(g.epp.ln)
}

// stopEPP answers NOT_SERVING to health checks, then lets the streams in
// flight end until ctx does, and cuts the rest.
func (g *Gateway) stopEPP(ctx context.Context) {
	if g.epp.ln == nil {
		return
	}
	g.epp.srv.Drain()
	done := make(chan struct{})
	go func() {
		g.epp.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		g.epp.grpc.Stop()
		<-done
	}
}

// selfSigned is a certificate for the EPP's TLS, made and signed by
// itself at now, valid for ten years: the gateways in front of an EPP
// speak TLS to it without checking its certificate, as the reference EPP
// makes its own too.
func selfSigned(now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"llmgw"}, CommonName: "llmgw-epp"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
