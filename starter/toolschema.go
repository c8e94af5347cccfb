package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

func (c *command) parseToolSchema(fs *flag.FlagSet, args []string) error {
	fs.StringVar(&c.format, "format", client.FormatOpenAI, "openai or anthropic")
	langs := fs.String("languages", guard.Python, "languages offered, comma-separated")
	fs.StringVar(&c.tool.Backend, "backend", "", "the backend that runs the code (local adds a warning)")
	fs.DurationVar(&c.tool.Timeout, "timeout", guard.DefaultTimeout, "the run's time limit")
	if _, err := cli.Parse(fs, args, 0, 0); err != nil {
		return err
	}
	var err error
	if c.tool.Languages, err = cli.List("languages", *langs); err != nil {
		return err
	}
	for _, l := range c.tool.Languages {
		if l != guard.Python && l != guard.Shell {
			return &cli.UsageError{Msg: fmt.Sprintf("--languages: %q is not a language the backends offer (python, sh)", l)}
		}
	}
	if c.format != client.FormatOpenAI && c.format != client.FormatAnthropic {
		return &cli.UsageError{Msg: fmt.Sprintf("--format %q: want %s or %s", c.format, client.FormatOpenAI, client.FormatAnthropic)}
	}
	if c.tool.Timeout <= 0 {
		return &cli.UsageError{Msg: fmt.Sprintf("--timeout %s must be positive", c.tool.Timeout)}
	}
	return nil
}

// toolSchemaCmd prints the run_code tool's schema for the model's API.
func toolSchemaCmd(c *command, stdout io.Writer) error {
	b, err := client.ToolSchema(c.format, c.tool)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, string(b))
	return err
}
