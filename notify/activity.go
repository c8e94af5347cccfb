package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/client"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// Kinds of channel: one entry each, the names used in logs and in NotifyResult.Delivered.
const (
	KindWebhook = "webhook"
	KindSlack   = "slack"
	KindEmail   = "email"
)

// Channel delivers a message one way.
type Channel interface {
	Name() string
	Send(ctx context.Context, m Message) error
}

// Config configures a worker's notifications.
type Config struct {
	// Channels deliver each notification, in turn. Required (an Activities with none refuses
	// every notification, so another worker is tried).
	Channels []Channel
	// InboxURL is the reviewers' inbox base URL (scheme://host[:port][/path]): notifications
	// link to the run's page under it. Optional: no link.
	InboxURL string
	// IncludeCode puts the code, escaped, in every notification. Optional: off, and then no
	// notification carries code.
	IncludeCode bool
	// Logger logs each delivery and failure. Optional: slog.Default().
	Logger *slog.Logger
	// DataConverter decodes the runs' payloads (the workers' payload codec), to read the
	// previous run of a conversation. Optional: the SDK's default.
	DataConverter converter.DataConverter
	// ReviewersFile is the reviewers file a conversation's previous run's decision is verified
	// against before a notification says who decided it (client.WithReviewersFile). Optional:
	// without it the previous run is "unverified". PasskeyOrigin is the inbox's origin, where
	// a passkey decision must have been made (the workers' --passkey-origin).
	ReviewersFile, PasskeyOrigin string
}

// Activities is the notify activity of one worker.
type Activities struct {
	cfg Config
}

// New validates cfg and returns the activity; a bad setting is a guard.ConfigError.
func New(cfg Config) (*Activities, error) {
	if cfg.InboxURL != "" {
		u, err := url.Parse(cfg.InboxURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, &guard.ConfigError{Msg: fmt.Sprintf("notify: --notify-inbox-url %q: want http(s)://host[:port][/path]", cfg.InboxURL)}
		}
	}
	seen := map[string]bool{}
	for _, c := range cfg.Channels {
		if seen[c.Name()] {
			return nil, &guard.ConfigError{Msg: "notify: two " + c.Name() + " channels"}
		}
		seen[c.Name()] = true
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Activities{cfg: cfg}, nil
}

// Enabled reports whether the worker has any channel: only then should its checks record
// contract.NotifyOptions, so that workflows notify.
func (a *Activities) Enabled() bool { return len(a.cfg.Channels) > 0 }

// Register registers Notify as contract.NotifyActivityName, on every worker that polls a
// workflow task queue.
func (a *Activities) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.Notify, activity.RegisterOptions{Name: contract.NotifyActivityName})
}

// changesTimeout bounds reading the previous run of a conversation.
const changesTimeout = 15 * time.Second

// errNoChannels is returned by a worker with no channel: Temporal tries again, maybe on another
// worker.
var errNoChannels = errors.New("notify: this worker has no notification channel")

// Notify delivers in's notification on every channel. A channel an earlier attempt delivered to
// (recorded in its heartbeat) is skipped; any failure fails the attempt, so Temporal tries
// again with backoff. It heartbeats while it works, so a worker lost mid-delivery is noticed
// and another one delivers, with the same webhook-id.
func (a *Activities) Notify(ctx context.Context, in contract.NotifyInput) (contract.NotifyResult, error) {
	if len(a.cfg.Channels) == 0 {
		return contract.NotifyResult{}, errNoChannels
	}
	info := activity.GetInfo(ctx)
	var done []string
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &done)
	}
	d := &deliveries{done: done}
	stop := heartbeat(ctx, info.HeartbeatTimeout, d.snapshot)
	defer stop()
	if in.Since.IsZero() {
		in.Since = info.ScheduledTime
	}
	log := a.cfg.Logger.With("attempt", info.Attempt)
	m := a.message(in)
	if in.Conversation != "" {
		m.Data.Changes = a.changes(ctx, activity.GetClient(ctx), in, log)
	}
	err := a.deliver(ctx, m, in, d, log, func() { activity.RecordHeartbeat(ctx, d.snapshot()) })
	if err != nil {
		return contract.NotifyResult{}, err
	}
	return contract.NotifyResult{Delivered: d.snapshot()}, nil
}

// Send delivers in's notification on every channel once, outside any activity (for a tool or a
// test that sends one by hand).
func (a *Activities) Send(ctx context.Context, in contract.NotifyInput) error {
	if len(a.cfg.Channels) == 0 {
		return errNoChannels
	}
	if in.Since.IsZero() {
		in.Since = time.Now()
	}
	return a.deliver(ctx, a.message(in), in, &deliveries{}, a.cfg.Logger, func() {})
}

// deliveries are the channels delivered to so far, shared with the heartbeat.
type deliveries struct {
	mu   sync.Mutex
	done []string
}

func (d *deliveries) snapshot() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.done)
}

// message is in's message under this worker's settings.
func (a *Activities) message(in contract.NotifyInput) Message {
	return newMessage(in, a.cfg.InboxURL, a.cfg.IncludeCode, in.Since)
}

// changes reads what changed since the previous run of in's conversation, through the client's
// door; the code's diff only with IncludeCode. A failure is said in the message, which goes out
// all the same.
func (a *Activities) changes(ctx context.Context, tc tclient.Client, in contract.NotifyInput, log *slog.Logger) *Changes {
	c, err := client.New(client.Options{Temporal: tc, DataConverter: a.cfg.DataConverter})
	if err != nil {
		return &Changes{Error: err.Error()}
	}
	c = c.WithReviewersFile(a.cfg.ReviewersFile, a.cfg.PasskeyOrigin)
	ctx, cancel := context.WithTimeout(ctx, changesTimeout)
	defer cancel()
	req, err := c.StartInput(ctx, in.WorkflowID, in.RunID)
	if err != nil {
		log.Warn("notify: read the run's input", "error", err.Error())
		return &Changes{Error: err.Error()}
	}
	// The diff shows the checked limits, as the previous run's side and every view do.
	if st, err := c.RunStatus(ctx, in.WorkflowID, in.RunID); err == nil {
		req.Request.Limits = client.CheckedLimits(req.Request.Limits, st.Request.Limits)
	}
	ch, err := c.ChangesOf(ctx, in.WorkflowID, in.RunID, in.Since, req.Request)
	if err != nil {
		log.Warn("notify: read the conversation's previous run", "error", err.Error())
		return &Changes{Error: err.Error()}
	}
	return changesOf(ch, a.cfg.IncludeCode)
}

// deliver sends m on each channel not in d yet, adding those that took it (and calling
// delivered after each); it returns every channel's failure.
func (a *Activities) deliver(ctx context.Context, m Message, in contract.NotifyInput, d *deliveries, log *slog.Logger, delivered func()) error {
	log = log.With("event", in.Event, "workflow_id", in.WorkflowID, "run_id", in.RunID, "cell", in.Cell, "webhook_id", m.ID)
	var errs []error
	for _, c := range a.cfg.Channels {
		if slices.Contains(d.snapshot(), c.Name()) {
			continue
		}
		if err := c.Send(ctx, m); err != nil {
			log.Warn("notify: delivery failed", "channel", c.Name(), "error", err.Error())
			errs = append(errs, err)
			continue
		}
		log.Info("notify: delivered", "channel", c.Name())
		d.mu.Lock()
		d.done = append(d.done, c.Name())
		d.mu.Unlock()
		delivered()
	}
	return errors.Join(errs...)
}

// heartbeat records details() at once and then every third of timeout until stop is called.
func heartbeat(ctx context.Context, timeout time.Duration, details func() []string) (stop func()) {
	interval := 5 * time.Second
	if timeout > 0 {
		interval = max(timeout/3, 100*time.Millisecond)
	}
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			activity.RecordHeartbeat(ctx, details())
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}
