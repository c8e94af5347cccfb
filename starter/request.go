package main

import (
	"fmt"
	"io"
	"os"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

// maxReadBytes bounds what run reads from a code or input file: well over Temporal's payload
// limit, which the client checks with a message that names it.
const maxReadBytes = 16 << 20

// readRequest reads the code and the input files of a run command into cmd.req, byte for byte.
func (cmd *command) readRequest(stdin io.Reader) error {
	if err := cmd.readCode(stdin); err != nil {
		return err
	}
	files, err := cmd.readInputs()
	cmd.req.Files = files
	if err != nil {
		return err
	}
	cmd.req.Packages, err = cmd.readPackages()
	return err
}

// readPackages reads the --packages lock ("" for none).
func (cmd *command) readPackages() (string, error) {
	if cmd.packages == "" {
		return "", nil
	}
	lock, err := client.ReadLockFile(cmd.packages)
	if err != nil {
		return "", &cli.UsageError{Msg: fmt.Sprintf("--packages: %v", err)}
	}
	return lock, nil
}

// readCode reads the code (--code, --file or a session cell's FILE, - for stdin) into
// cmd.req.Code, byte for byte.
func (cmd *command) readCode(stdin io.Reader) error {
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
	return nil
}

// readInputs reads the --input files, name → bytes (nil for none).
func (cmd *command) readInputs() (map[string][]byte, error) {
	var files map[string][]byte
	for name, path := range cmd.inputs.Map {
		b, err := readFile(path)
		if err != nil {
			return nil, &cli.UsageError{Msg: fmt.Sprintf("--input %s: %v", name, err)}
		}
		if files == nil {
			files = map[string][]byte{}
		}
		files[name] = b
	}
	return files, nil
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
