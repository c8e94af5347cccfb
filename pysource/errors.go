package pysource

import "fmt"

// Error says that Python, sh or a reviewer would read source or a name other than it is drawn.
// Msg names the file (as the caller gave it) and the line.
type Error struct {
	Msg string
}

func (e *Error) Error() string { return e.Msg }

func errorf(format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...)}
}
