// Command starter is how agent orchestrators and reviewers use sandboxflow from a terminal or a
// script: run, pending, show, statement, approve, deny, result and tool-schema. Every command prints JSON.
//
// It reaches Temporal through TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE (or --address and
// --namespace), and reads the payload keys from SANDBOXFLOW_KEY_FILE (or --key-file) when the
// workers encrypt payloads.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/codec"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

const usage = `usage: starter COMMAND [flags]

commands:
  run --code CODE | --file F [--language python] [--input NAME=PATH]... [--env NAME=VALUE]...
      [--timeout 30s] [--network] [--capture-content] [--wait]
                       start a run; prints {"workflow_id", "run_id", "digest"}; --wait then prints the result
  pending              list the runs that wait for a decision
  show ID [--env-values]
                       everything a reviewer needs (env values only with --env-values)
  statement ID [--deny] [--approval-id U]
                       print the statement a reviewer signs (ssh-keygen -Y sign -n sandboxflow-approval)
  approve ID --digest D --key FILE [--reason R]
  deny ID --key FILE --reason R
                       sign the decision with your reviewer key (--key or SANDBOXFLOW_REVIEWER_KEY;
                       a .pub file signs through ssh-agent) and send it
  result ID            wait for the run's result (exit 1 with {"error": ...} when it did not run)
  tool-schema --format openai|anthropic [--languages python,sh] [--backend NAME]

connection flags (every command but tool-schema; environment in brackets):
  --address HOST:PORT [TEMPORAL_ADDRESS]   --namespace NS [TEMPORAL_NAMESPACE]
  --task-queue Q [SANDBOXFLOW_TASK_QUEUE]  --key-file F [SANDBOXFLOW_KEY_FILE]
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	code, err := run(ctx, os.Args[1], os.Args[2:], os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starter:", err)
	}
	os.Exit(code)
}

type connFlags struct {
	conn      client.Connection
	taskQueue string
	keyFile   string
}

func addConnFlags(fs *flag.FlagSet) *connFlags {
	c := &connFlags{conn: client.ConnectionFromEnv()}
	fs.StringVar(&c.conn.Address, "address", c.conn.Address, "Temporal frontend host:port (TEMPORAL_ADDRESS; default 127.0.0.1:7233)")
	fs.StringVar(&c.conn.Namespace, "namespace", c.conn.Namespace, "Temporal namespace (TEMPORAL_NAMESPACE; default \"default\")")
	fs.StringVar(&c.taskQueue, "task-queue", envOr("SANDBOXFLOW_TASK_QUEUE", client.DefaultTaskQueue), "task queue of RunCode workflows")
	fs.StringVar(&c.keyFile, "key-file", os.Getenv("SANDBOXFLOW_KEY_FILE"), "payload encryption keys shared with the workers")
	return c
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (c *connFlags) dial(ctx context.Context) (tclient.Client, *client.Client, error) {
	conn := c.conn
	if c.keyFile != "" {
		ring, err := codec.LoadKeyRing(c.keyFile)
		if err != nil {
			return nil, nil, err
		}
		conn.KeyRing = ring
	}
	opts, err := conn.Options()
	if err != nil {
		return nil, nil, err
	}
	tc, err := client.Dial(ctx, conn)
	if err != nil {
		return nil, nil, err
	}
	sc, err := client.New(client.Options{Temporal: tc, TaskQueue: c.taskQueue, DataConverter: opts.DataConverter})
	if err != nil {
		tc.Close()
		return nil, nil, err
	}
	return tc, sc, nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func run(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout io.Writer) (int, error) {
	fs := flag.NewFlagSet("starter "+cmd, flag.ContinueOnError)
	out := json.NewEncoder(stdout)
	switch cmd {
	case "run":
		return runCmd(ctx, fs, args, stdin, out)
	case "pending":
		cf := addConnFlags(fs)
		if err := fs.Parse(args); err != nil {
			return 2, nil
		}
		tc, sc, err := cf.dial(ctx)
		if err != nil {
			return 1, err
		}
		defer tc.Close()
		pending, err := sc.Pending(ctx)
		if err != nil {
			return 1, err
		}
		if pending == nil {
			pending = []client.Pending{}
		}
		return 0, out.Encode(pending)
	case "show":
		cf := addConnFlags(fs)
		envValues := fs.Bool("env-values", false, "also show env values (they are hidden by default)")
		id, err := parseWithID(fs, args)
		if err != nil {
			return 2, err
		}
		tc, sc, err := cf.dial(ctx)
		if err != nil {
			return 1, err
		}
		defer tc.Close()
		st, err := sc.Status(ctx, id)
		if err != nil {
			return 1, err
		}
		if !*envValues {
			return 0, out.Encode(showView{WorkflowID: id, Status: st})
		}
		env, err := sc.EnvValues(ctx, id)
		if err != nil {
			return 1, err
		}
		return 0, out.Encode(showView{WorkflowID: id, Status: st, Env: env})
	case "statement", "approve", "deny":
		return reviewCmd(ctx, cmd, fs, args, stdout)
	case "result":
		cf := addConnFlags(fs)
		id, err := parseWithID(fs, args)
		if err != nil {
			return 2, err
		}
		tc, sc, err := cf.dial(ctx)
		if err != nil {
			return 1, err
		}
		defer tc.Close()
		return printResult(ctx, sc, id, out)
	case "tool-schema":
		format := fs.String("format", client.FormatOpenAI, "openai or anthropic")
		langs := fs.String("languages", guard.Python, "languages offered, comma-separated")
		backend := fs.String("backend", "", "the backend that runs the code (local adds a warning)")
		timeout := fs.Duration("timeout", guard.DefaultTimeout, "the run's time limit")
		if err := fs.Parse(args); err != nil {
			return 2, nil
		}
		b, err := client.ToolSchema(*format, client.ToolOptions{Languages: strings.Split(*langs, ","), Backend: *backend, Timeout: *timeout})
		if err != nil {
			return 2, err
		}
		_, err = fmt.Fprintln(stdout, string(b))
		return 0, err
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0, nil
	}
	return 2, fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

type showView struct {
	WorkflowID string `json:"workflow_id"`
	contract.Status
	Env map[string]string `json:"env_values,omitempty"`
}

func parseWithID(fs *flag.FlagSet, args []string) (string, error) {
	// Accept the id before or after the flags.
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if id == "" && fs.NArg() > 0 {
		id = fs.Arg(0)
	}
	if id == "" {
		return "", errors.New("a workflow id is required")
	}
	return id, nil
}

func runCmd(ctx context.Context, fs *flag.FlagSet, args []string, stdin io.Reader, out *json.Encoder) (int, error) {
	cf := addConnFlags(fs)
	var (
		codeFlag = fs.String("code", "", "the code to run")
		file     = fs.String("file", "", "read the code from a file (- for stdin)")
		language = fs.String("language", guard.Python, "python or sh")
		timeout  = fs.Duration("timeout", 0, "time limit (default: the policy's, 30s)")
		network  = fs.Bool("network", false, "ask for a network (the policy must allow it)")
		capture  = fs.Bool("capture-content", false, "let events carry code and output")
		wait     = fs.Bool("wait", false, "wait for the decision and print the result")
		wfID     = fs.String("workflow-id", "", "the run's workflow id (default: sandbox-<uuid>)")
		agent    = fs.String("agent", "", "metadata: the agent")
		session  = fs.String("session", "", "metadata: the session")
		toolCall = fs.String("tool-call-id", "", "metadata: the tool call")
		by       = fs.String("requested-by", os.Getenv("USER"), "metadata: who asked")
		inputs   multiFlag
		envs     multiFlag
	)
	fs.Var(&inputs, "input", "input file NAME=PATH (repeatable)")
	fs.Var(&envs, "env", "env var NAME=VALUE (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2, nil
	}
	code, err := readCode(*codeFlag, *file, stdin)
	if err != nil {
		return 2, err
	}
	req := guard.Request{
		Code:           code,
		Language:       *language,
		Limits:         guard.Limits{Timeout: *timeout},
		Network:        *network,
		CaptureContent: *capture,
		Metadata:       guard.Metadata{Agent: *agent, Session: *session, ToolCallID: *toolCall, RequestedBy: *by},
	}
	for _, in := range inputs {
		name, path, ok := strings.Cut(in, "=")
		if !ok {
			return 2, fmt.Errorf("--input %q: want NAME=PATH", in)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return 2, fmt.Errorf("--input %s: %w", name, err)
		}
		if req.Files == nil {
			req.Files = map[string][]byte{}
		}
		req.Files[name] = b
	}
	for _, e := range envs {
		name, value, ok := strings.Cut(e, "=")
		if !ok {
			return 2, fmt.Errorf("--env %q: want NAME=VALUE", e)
		}
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		req.Env[name] = value
	}
	tc, sc, err := cf.dial(ctx)
	if err != nil {
		return 1, err
	}
	defer tc.Close()
	started, err := sc.Start(ctx, req, client.StartOptions{WorkflowID: *wfID})
	if err != nil {
		if guard.TypeOf(err) != "" {
			_ = out.Encode(client.NewErrorOutput(err))
		}
		return 1, err
	}
	if err := out.Encode(started); err != nil {
		return 1, err
	}
	if !*wait {
		return 0, nil
	}
	return printResult(ctx, sc, started.WorkflowID, out)
}

func readCode(code, file string, stdin io.Reader) (string, error) {
	switch {
	case code != "" && file != "":
		return "", errors.New("give --code or --file, not both")
	case code != "":
		return code, nil
	case file == "-":
		b, err := io.ReadAll(io.LimitReader(stdin, 16<<20))
		return string(b), err
	case file != "":
		b, err := os.ReadFile(file)
		return string(b), err
	}
	return "", errors.New("give the code with --code CODE or --file F (--file - reads stdin)")
}

func printResult(ctx context.Context, sc *client.Client, id string, out *json.Encoder) (int, error) {
	res, err := sc.Result(ctx, id)
	if err != nil {
		if guard.TypeOf(err) == "" {
			return 1, err
		}
		return 1, out.Encode(client.NewErrorOutput(err))
	}
	return 0, out.Encode(client.NewOutput(res))
}
