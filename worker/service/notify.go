package service

import (
	"flag"

	"go.temporal.io/sdk/converter"

	"log/slog"
	"strconv"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/notify"
)

// NotifyOptions are the worker's notification channels (package notify). A workflow worker with
// any channel records contract.NotifyOptions in every check, so its runs (and cells) notify
// reviewers when they start waiting.
type NotifyOptions struct {
	// WebhookURL receives a Standard Webhooks POST, signed with the whsec_ secret in
	// WebhookSecretFile (required with it).
	WebhookURL        string
	WebhookSecretFile string
	// SlackURL is a Slack-compatible incoming webhook.
	SlackURL string
	// SMTP is the SMTP server (host:port) that sends email, always after STARTTLS, from SMTPFrom
	// to SMTPTo (comma-separated), with SMTPUsername and the password in SMTPPasswordFile when
	// set; SMTPCAFile verifies the server (default: the host's roots).
	SMTP             string
	SMTPFrom         string
	SMTPTo           string
	SMTPUsername     string
	SMTPPasswordFile string
	SMTPCAFile       string
	// InboxURL is the inbox base URL notifications link to. Optional.
	InboxURL string
	// IncludeCode puts the code, escaped, in notifications. Off by default.
	IncludeCode bool
}

// NotifyFlags registers the notification flags.
func NotifyFlags(fs *flag.FlagSet, o *Options) {
	n := &o.Notify
	fs.StringVar(&n.WebhookURL, "notify-webhook", "", "POST a Standard Webhooks notification to URL when a run or cell waits for a decision (needs --notify-webhook-secret-file)")
	fs.StringVar(&n.WebhookSecretFile, "notify-webhook-secret-file", "", "file holding the webhook signing secret, whsec_<base64 of 24 to 64 bytes>")
	fs.StringVar(&n.SlackURL, "notify-slack", "", "post a notification to this Slack-compatible incoming-webhook URL (a secret: prefer SANDBOXFLOW_NOTIFY_SLACK)")
	fs.StringVar(&n.SMTP, "notify-smtp", "", "email notifications through this SMTP server, host:port (STARTTLS required)")
	fs.StringVar(&n.SMTPFrom, "notify-smtp-from", "", "sender address of notification emails")
	fs.StringVar(&n.SMTPTo, "notify-smtp-to", "", "recipients of notification emails, comma-separated")
	fs.StringVar(&n.SMTPUsername, "notify-smtp-username", "", "SMTP user name (PLAIN auth, only inside TLS)")
	fs.StringVar(&n.SMTPPasswordFile, "notify-smtp-password-file", "", "file holding the SMTP password")
	fs.StringVar(&n.SMTPCAFile, "notify-smtp-ca-file", "", "PEM certificates that verify the SMTP server (default: the host's roots)")
	fs.StringVar(&n.InboxURL, "notify-inbox-url", "", "the reviewers' inbox base URL notifications link to (default with --dev: its inbox)")
	fs.BoolVar(&n.IncludeCode, "notify-include-code", false, "put the code, escaped, in notifications (off: notifications never carry code)")
}

// notifyActivities builds the notify activity from the options (with no channel when none is
// set), reading runs with dc (nil: the SDK's default) and verifying a conversation's previous
// run against the reviewers file; a bad setting is a guard.ConfigError.
func notifyActivities(cfg *Options, dc converter.DataConverter, logger *slog.Logger, reviewers string) (*notify.Activities, error) {
	n := cfg.Notify
	var channels []notify.Channel
	if n.WebhookURL != "" || n.WebhookSecretFile != "" {
		if n.WebhookURL == "" || n.WebhookSecretFile == "" {
			return nil, &guard.ConfigError{Msg: "--notify-webhook and --notify-webhook-secret-file go together"}
		}
		secret, err := notify.LoadSecret(n.WebhookSecretFile)
		if err != nil {
			return nil, err
		}
		channels = append(channels, notify.NewWebhook(n.WebhookURL, secret))
	}
	if n.SlackURL != "" {
		channels = append(channels, notify.NewSlack(n.SlackURL))
	}
	if n.SMTP != "" || n.SMTPFrom != "" || n.SMTPTo != "" {
		e, err := notify.NewEmail(notify.EmailConfig{
			Addr: n.SMTP, From: n.SMTPFrom, To: splitList(n.SMTPTo),
			Username: n.SMTPUsername, PasswordFile: n.SMTPPasswordFile, CAFile: n.SMTPCAFile,
		})
		if err != nil {
			return nil, err
		}
		channels = append(channels, e)
	}
	inbox := n.InboxURL
	if inbox == "" && cfg.Dev && cfg.InboxPort >= 0 {
		inbox = "http://localhost:" + strconv.Itoa(cfg.InboxPort)
	}
	return notify.New(notify.Config{Channels: channels, InboxURL: inbox, IncludeCode: n.IncludeCode, Logger: logger, DataConverter: dc, ReviewersFile: reviewers, PasskeyOrigin: passkeyOrigin(cfg)})
}

// notifyRecorded is what checks record: the defaults when the worker has channels, else nil.
func notifyRecorded(a *notify.Activities) *contract.NotifyOptions {
	if !a.Enabled() {
		return nil
	}
	return &contract.NotifyOptions{}
}
