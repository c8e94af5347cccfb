package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/smallfile"
)

// Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// secretPrefix starts a Standard Webhooks secret.
const secretPrefix = "whsec_"

// Bounds of a webhook secret's key, as the Standard Webhooks spec recommends.
const (
	minSecretBytes = 24
	maxSecretBytes = 64
)

// httpTimeout bounds one HTTP delivery (webhook or Slack).
const httpTimeout = 15 * time.Second

// Webhook posts the message as JSON, signed the Standard Webhooks way.
type Webhook struct {
	url    string
	secret []byte
	client *http.Client
	now    func() time.Time
}

// LoadSecret reads a Standard Webhooks secret ("whsec_" and the base64 of 24 to 64 bytes) from
// a file; a bad one is a guard.ConfigError.
func LoadSecret(path string) ([]byte, error) {
	raw, err := smallfile.Read(path, 4096)
	if err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("notify: webhook secret file: %v", err)}
	}
	s := strings.TrimSpace(string(raw))
	if !strings.HasPrefix(s, secretPrefix) {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("notify: webhook secret file %s: want whsec_<base64>", path)}
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, secretPrefix))
	if err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("notify: webhook secret file %s: the part after whsec_ is not base64: %v", path, err)}
	}
	if len(key) < minSecretBytes || len(key) > maxSecretBytes {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("notify: webhook secret file %s: the key is %d bytes; want %d to %d", path, len(key), minSecretBytes, maxSecretBytes)}
	}
	return key, nil
}

// NewWebhook returns the webhook channel for url, signing with secret (LoadSecret's key).
func NewWebhook(url string, secret []byte) *Webhook {
	return &Webhook{url: url, secret: secret, client: newHTTPClient(), now: time.Now}
}

// Name is KindWebhook.
func (w *Webhook) Name() string { return KindWebhook }

// Send posts m, signed for the time of this attempt.
func (w *Webhook) Send(ctx context.Context, m Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("notify: webhook: encode: %w", err)
	}
	ts := strconv.FormatInt(w.now().Unix(), 10)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(HeaderID, m.ID)
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderSignature, Sign(w.secret, m.ID, ts, body))
	return post(ctx, w.client, KindWebhook, w.url, h, body)
}

// Sign returns the webhook-signature value of a message: "v1," and the base64 of
// HMAC-SHA256(key, id.timestamp.body).
func Sign(key []byte, id, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// newHTTPClient is the client of the HTTP channels: bounded, and never following a redirect (a
// delivery goes where the operator configured it, or fails).
func newHTTPClient() *http.Client {
	return &http.Client{
		Timeout:       httpTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// post sends body to url and wants a 2xx answer.
func post(ctx context.Context, c *http.Client, kind, url string, h http.Header, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("notify: %s: %w", kind, err)
	}
	req.Header = h
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("notify: %s: post: %w", kind, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &DeliveryError{Channel: kind, Status: resp.StatusCode}
	}
	return nil
}

// DeliveryError is a receiver's refusal: an HTTP status other than 2xx.
type DeliveryError struct {
	Channel string
	Status  int
}

func (e *DeliveryError) Error() string {
	return fmt.Sprintf("notify: %s: the receiver answered %d %s", e.Channel, e.Status, http.StatusText(e.Status))
}
