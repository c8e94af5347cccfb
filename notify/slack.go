package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Slack's limits on block text.
const (
	slackHeaderBytes = 150
	slackFieldBytes  = 1900
	slackCodeBytes   = 2800
)

// Slack posts the message to a Slack-compatible incoming webhook.
type Slack struct {
	url    string
	client *http.Client
}

// NewSlack returns the Slack channel for an incoming-webhook url.
func NewSlack(url string) *Slack { return &Slack{url: url, client: newHTTPClient()} }

// Name is KindSlack.
func (s *Slack) Name() string { return KindSlack }

// slackText is a Slack text object.
type slackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// slackBlock is a Slack layout block (header, section or context).
type slackBlock struct {
	Type     string      `json:"type"`
	Text     *slackText  `json:"text,omitempty"`
	Fields   []slackText `json:"fields,omitempty"`
	Elements []slackText `json:"elements,omitempty"`
}

// SlackBody is the incoming-webhook body.
type SlackBody struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks"`
}

// Send posts m's Slack body.
func (s *Slack) Send(ctx context.Context, m Message) error {
	body, err := json.Marshal(slackBody(m))
	if err != nil {
		return fmt.Errorf("notify: slack: encode: %w", err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return post(ctx, s.client, KindSlack, s.url, h, body)
}

// slackBody renders m. Every value from the request goes in plain_text objects, which Slack
// never reads as markup; the one mrkdwn text is the fallback "text" (escaped with
// escapeMrkdwn) and the inbox link, whose URL is the operator's base and a path-escaped id.
func slackBody(m Message) SlackBody {
	b := SlackBody{Text: escapeMrkdwn(oneLine(m.title()))}
	b.Blocks = append(b.Blocks, slackBlock{Type: "header", Text: &slackText{Type: "plain_text", Text: truncate(oneLine(headerTitle(m)), slackHeaderBytes)}})
	var fields []slackText
	for _, f := range m.fields() {
		if f.Label == "Inbox" {
			continue
		}
		fields = append(fields, slackText{Type: "plain_text", Text: truncate(f.Label+": "+oneLine(f.Value), slackFieldBytes)})
	}
	// A section holds at most 10 fields.
	for len(fields) > 0 {
		n := min(len(fields), 10)
		b.Blocks = append(b.Blocks, slackBlock{Type: "section", Fields: fields[:n]})
		fields = fields[n:]
	}
	if m.Data.Code != "" {
		b.Blocks = append(b.Blocks, slackBlock{Type: "section", Text: &slackText{Type: "plain_text", Text: codeLines(m.Data.Code, "| ", slackCodeBytes)}})
	}
	if ch := m.Data.Changes; ch != nil && ch.Diff != "" {
		b.Blocks = append(b.Blocks, slackBlock{Type: "section", Text: &slackText{Type: "plain_text", Text: "What changed (a reading aid only):\n" + codeLines(ch.Diff, "| ", slackCodeBytes)}})
	}
	b.Blocks = append(b.Blocks, slackBlock{Type: "context", Elements: []slackText{{Type: "plain_text",
		Text: "This message approves nothing: read the run in the inbox or with starter show before deciding."}}})
	if m.Data.InboxURL != "" {
		link := "<" + escapeMrkdwn(m.Data.InboxURL) + "|Open in the inbox to review and decide>"
		b.Blocks = append(b.Blocks, slackBlock{Type: "section", Text: &slackText{Type: "mrkdwn", Text: link}})
	}
	return b
}

// headerTitle is the header block's text.
func headerTitle(m Message) string {
	return strings.TrimPrefix(m.title(), "sandboxflow: ")
}

// escapeMrkdwn escapes the three characters Slack reads as control characters in mrkdwn (&, <
// and >): no mention (<!channel>), link or user reference can come from the model's strings.
func escapeMrkdwn(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
