package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"strings"
	"time"
	"unicode"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/smallfile"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// smtpTimeout bounds one email delivery.
const smtpTimeout = 30 * time.Second

// emailCodeBytes bounds the code an email carries (with Config.IncludeCode).
const emailCodeBytes = 64 << 10

// maxSubjectBytes bounds the subject's run id part.
const maxSubjectBytes = 200

// Email sends the message as a text/plain email over SMTP, only after STARTTLS.
type Email struct {
	addr, host string
	from       string
	to         []string
	user, pass string
	roots      *x509.CertPool
	now        func() time.Time
}

// EmailConfig configures the email channel.
type EmailConfig struct {
	// Addr is the SMTP server, host:port (submission is usually port 587). Required.
	Addr string
	// From is the sender address; To the recipients. Required.
	From string
	To   []string
	// Username and PasswordFile are the SMTP credentials (PLAIN, sent only inside TLS).
	// Optional: empty sends without authenticating.
	Username     string
	PasswordFile string
	// CAFile holds the PEM certificates that verify the server. Optional: the host's roots.
	CAFile string
}

// NewEmail validates cfg and returns the email channel; a bad setting is a guard.ConfigError.
func NewEmail(cfg EmailConfig) (*Email, error) {
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil || host == "" {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("notify: --notify-smtp %q: want host:port", cfg.Addr)}
	}
	e := &Email{addr: cfg.Addr, host: host, user: cfg.Username, now: time.Now}
	from, err := mail.ParseAddress(cfg.From)
	if err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("notify: --notify-smtp-from %q: %v", cfg.From, err)}
	}
	e.from = from.Address
	if len(cfg.To) == 0 {
		return nil, &guard.ConfigError{Msg: "notify: --notify-smtp needs --notify-smtp-to"}
	}
	for _, t := range cfg.To {
		a, err := mail.ParseAddress(t)
		if err != nil {
			return nil, &guard.ConfigError{Msg: fmt.Sprintf("notify: --notify-smtp-to %q: %v", t, err)}
		}
		e.to = append(e.to, a.Address)
	}
	if (cfg.Username == "") != (cfg.PasswordFile == "") {
		return nil, &guard.ConfigError{Msg: "notify: --notify-smtp-username and --notify-smtp-password-file go together"}
	}
	if cfg.PasswordFile != "" {
		p, err := smallfile.Read(cfg.PasswordFile, 4096)
		if err != nil {
			return nil, &guard.ConfigError{Msg: fmt.Sprintf("notify: SMTP password file: %v", err)}
		}
		e.pass = strings.TrimRight(string(p), "\r\n")
	}
	if cfg.CAFile != "" {
		pem, err := smallfile.Read(cfg.CAFile, 1<<20)
		if err != nil {
			return nil, &guard.ConfigError{Msg: fmt.Sprintf("notify: SMTP CA file: %v", err)}
		}
		e.roots = x509.NewCertPool()
		if !e.roots.AppendCertsFromPEM(pem) {
			return nil, &guard.ConfigError{Msg: fmt.Sprintf("notify: SMTP CA file %s holds no PEM certificate", cfg.CAFile)}
		}
	}
	return e, nil
}

// Name is KindEmail.
func (e *Email) Name() string { return KindEmail }

// ErrNoStartTLS is returned when the SMTP server does not offer STARTTLS: nothing is sent.
var ErrNoStartTLS = errors.New("notify: email: the SMTP server offers no STARTTLS; refusing to send without TLS")

// Send delivers m to every recipient.
func (e *Email) Send(ctx context.Context, m Message) error {
	ctx, cancel := context.WithTimeout(ctx, smtpTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", e.addr)
	if err != nil {
		return fmt.Errorf("notify: email: dial %s: %w", e.addr, err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	c, err := smtp.NewClient(conn, e.host)
	if err != nil {
		return fmt.Errorf("notify: email: greeting from %s: %w", e.addr, err)
	}
	defer c.Close()
	if err := c.Hello("sandboxflow.localhost"); err != nil {
		return fmt.Errorf("notify: email: EHLO: %w", err)
	}
	if ok, _ := c.Extension("STARTTLS"); !ok {
		return ErrNoStartTLS
	}
	if err := c.StartTLS(&tls.Config{ServerName: e.host, RootCAs: e.roots, MinVersion: tls.VersionTLS12}); err != nil {
		return fmt.Errorf("notify: email: STARTTLS: %w", err)
	}
	if e.user != "" {
		if err := c.Auth(smtp.PlainAuth("", e.user, e.pass, e.host)); err != nil {
			return fmt.Errorf("notify: email: AUTH: %w", err)
		}
	}
	if err := c.Mail(e.from); err != nil {
		return fmt.Errorf("notify: email: MAIL FROM: %w", err)
	}
	for _, t := range e.to {
		if err := c.Rcpt(t); err != nil {
			return fmt.Errorf("notify: email: RCPT TO %s: %w", t, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("notify: email: DATA: %w", err)
	}
	if _, err := w.Write(e.render(m)); err != nil {
		return fmt.Errorf("notify: email: write message: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("notify: email: end of message: %w", err)
	}
	if err := c.Quit(); err != nil {
		return fmt.Errorf("notify: email: QUIT: %w", err)
	}
	return nil
}

// render returns the message: its headers (each value from the request stripped of control
// characters and Q-encoded where it is not plain ASCII) and a quoted-printable text body.
func (e *Email) render(m Message) []byte {
	var b bytes.Buffer
	header := func(name, value string) { fmt.Fprintf(&b, "%s: %s\r\n", name, value) }
	header("From", e.from)
	header("To", strings.Join(e.to, ", "))
	header("Subject", headerValue(m.title()))
	header("Date", e.now().UTC().Format(time.RFC1123Z))
	header("Message-ID", "<"+m.ID+"@sandboxflow.invalid>")
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	header("Auto-Submitted", "auto-generated")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(emailText(m)))
	_ = qp.Close()
	return bytes.ReplaceAll(bytes.ReplaceAll(b.Bytes(), []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
}

// emailText is the body: one labelled line per field (each value on one line, escaped) and,
// with the code, the code with every line prefixed.
func emailText(m Message) string {
	var b strings.Builder
	b.WriteString(oneLine(m.title()) + ".\n\n")
	for _, f := range m.fields() {
		fmt.Fprintf(&b, "%-13s %s\n", f.Label+":", oneLine(f.Value))
	}
	if m.Data.Code != "" {
		b.WriteString("\nThe code (escaped; every line starts with \"| \"):\n")
		b.WriteString(codeLines(m.Data.Code, "| ", emailCodeBytes))
	}
	if ch := m.Data.Changes; ch != nil && ch.Diff != "" {
		b.WriteString("\nWhat changed since the previous run (a reading aid only; every line starts with \"| \"):\n")
		b.WriteString(codeLines(ch.Diff, "| ", emailCodeBytes))
	}
	b.WriteString("\nThis email approves nothing, and replying does nothing: read the run in the inbox or with `starter show` before deciding, then decide there (or with `starter approve`/`deny`).\n")
	return b.String()
}

// headerValue returns s as a header value: control characters (CR and LF included) become
// spaces, the length is bounded, and text that is not printable ASCII is Q-encoded.
func headerValue(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || pysource.IsSuspicious(r) {
			return ' '
		}
		return r
	}, s)
	return mime.QEncoding.Encode("utf-8", truncate(s, maxSubjectBytes))
}
