package main

import (
	"fmt"
	"io"
	"os"

	"github.com/sandboxflow/sandboxflow/internal/cli"
)

// maxReadBytes bounds what run reads from a code or input file: well over Temporal's payload
// limit, which the client checks with a message that names it.
const maxReadBytes = 16 << 20

// readRequest reads the code and the input files of a run command into cmd.req, byte for byte.
func (cmd *command) readRequest(stdin io.Reader) error {
	switch {
	case cmd.code != "":
		cmd.req.Code = cmd.code
	case cmd.file == "-":
		b, err := io.ReadAll(io.LimitReader(stdin, maxReadBytes+1))
		if err != nil {
			return fmt.Errorf("starter: read the code from stdin: %w", err)
		}
		cmd.req.Code = string(b)
	default:
		b, err := readFile(cmd.file)
		if err != nil {
			return &cli.UsageError{Msg: fmt.Sprintf("--file: %v", err)}
		}
		cmd.req.Code = string(b)
	}
	for name, path := range cmd.inputs.Map {
		b, err := readFile(path)
		if err != nil {
			return &cli.UsageError{Msg: fmt.Sprintf("--input %s: %v", name, err)}
		}
		if cmd.req.Files == nil {
			cmd.req.Files = map[string][]byte{}
		}
		cmd.req.Files[name] = b
	}
	return nil
}

// readFile reads at most maxReadBytes+1 bytes of path: enough for the client to say the request is
// over Temporal's limit without holding a huge file in memory.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxReadBytes+1))
}
