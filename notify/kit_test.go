package notify_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// selfSigned returns a TLS certificate for 127.0.0.1 and the path of a PEM file holding it (the
// client's CA file).
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, path
}

// mail is one message an smtpServer received.
type mail struct {
	From     string
	To       []string
	Data     []byte
	TLS      bool
	AuthUser string
}

// smtpServer is a go-smtp server on loopback that keeps what it receives. With a certificate it
// offers STARTTLS and PLAIN authentication (which go-smtp allows only inside TLS).
type smtpServer struct {
	Addr string

	mu       sync.Mutex
	mails    []mail
	commands []string
	arrived  chan mail
}

func startSMTP(t *testing.T, cert *tls.Certificate, user, pass string) *smtpServer {
	t.Helper()
	s := &smtpServer{arrived: make(chan mail, 16)}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &smtpSession{srv: s, conn: c, user: user, pass: pass}, nil
	}))
	srv.Domain = "127.0.0.1"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	if cert != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *smtpServer) note(cmd string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commands = append(s.commands, cmd)
}

type smtpSession struct {
	srv        *smtpServer
	conn       *smtp.Conn
	user, pass string
	cur        mail
}

func (s *smtpSession) AuthMechanisms() []string {
	if s.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *smtpSession) Auth(string) (sasl.Server, error) {
	s.srv.note("AUTH")
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.user || pass != s.pass {
			return errors.New("bad credentials")
		}
		s.cur.AuthUser = user
		return nil
	}), nil
}

func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	s.srv.note("MAIL")
	if s.user != "" && s.cur.AuthUser == "" {
		return errors.New("authenticate first")
	}
	s.cur.From = from
	return nil
}

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.To = append(s.cur.To, to)
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m := s.cur
	m.Data = b
	_, m.TLS = s.conn.TLSConnectionState()
	s.srv.mu.Lock()
	s.srv.mails = append(s.srv.mails, m)
	s.srv.mu.Unlock()
	s.srv.arrived <- m
	s.cur = mail{AuthUser: s.cur.AuthUser}
	return nil
}

func (s *smtpSession) Reset()        { s.cur = mail{AuthUser: s.cur.AuthUser} }
func (s *smtpSession) Logout() error { return nil }
