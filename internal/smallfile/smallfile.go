// Package smallfile reads the small files an operator names (key files, the reviewers file)
// without holding a huge file in memory when the wrong path is given.
package smallfile

import (
	"fmt"
	"io"
	"os"
)

// TooLargeError is returned for a file over the cap.
type TooLargeError struct {
	Path string
	Max  int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: larger than %d bytes", e.Path, e.Max)
}

// Read returns the content of the file at path, or a *TooLargeError when it holds more than max
// bytes (only max+1 of them are read). Errors from opening the file are returned unwrapped, so
// that errors.Is(err, fs.ErrNotExist) holds for a missing file.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > max {
		return nil, &TooLargeError{Path: path, Max: max}
	}
	return data, nil
}
