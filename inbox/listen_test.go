package inbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// selfSigned writes the certificate net/http/httptest serves (valid for 127.0.0.1) and its key
// to files, and returns their paths and the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	kp := ts.TLS.Certificates[0]
	ts.Close()
	keyDER, err := x509.MarshalPKCS8PrivateKey(kp.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(kp.Certificate[0]); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}

func TestServeOverTLS(t *testing.T) {
	certFile, keyFile, cert := selfSigned(t)
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "inbox") })
	go func() {
		done <- Serve(ctx, Listen{Addr: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile}, h, func(a string) { addrc <- a })
	}()
	addr := <-addrc
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get("https://" + addr + "/")
	if err != nil {
		t.Fatalf("GET over TLS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.TLS == nil || string(body) != "inbox" {
		t.Errorf("GET over TLS: tls=%v body %q", resp.TLS != nil, body)
	}
	// TLS 1.1 and older are refused.
	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Get("https://" + addr + "/"); err == nil {
		resp.Body.Close()
		t.Error("a TLS 1.1 client was served")
	}
	// Plain HTTP gets no page.
	if resp, err := http.Get("http://" + addr + "/"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) == "inbox" {
			t.Error("plain HTTP was served the page")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after ctx ended: %v", err)
	}
}

func TestServeRefusesABadKeyPairBeforeServing(t *testing.T) {
	certFile, _, _ := selfSigned(t)
	err := Serve(context.Background(), Listen{Addr: "127.0.0.1:0", CertFile: certFile, KeyFile: certFile}, http.NotFoundHandler(), func(string) {
		t.Error("ready was called for a server that cannot serve")
	})
	if err == nil || !strings.Contains(err.Error(), "inbox: TLS") {
		t.Fatalf("Serve with a certificate as its key: %v; want an inbox: TLS error", err)
	}
}
