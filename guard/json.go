package guard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Duration is a time.Duration in JSON as every language reads it: a string in Go's syntax
// ("30s", "1m30s", "250ms"). UnmarshalJSON also takes a number, read as nanoseconds, which is how
// older callers (and Go's default encoding) wrote durations.
type Duration time.Duration

// MarshalJSON writes the duration as a string such as "30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a string in Go's duration syntax, or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("guard: duration: %w", err)
		}
		if s == "" {
			*d = 0
			return nil
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("guard: duration %q: want Go's syntax such as \"30s\": %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("guard: duration %s: want a string such as \"30s\" or a number of nanoseconds: %w", b, err)
	}
	*d = Duration(n)
	return nil
}

// isJSONNumber reports whether a raw JSON value is a number (the old encoding of a duration).
func isJSONNumber(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9'))
}

// limitsJSON is the wire form of Limits.
type limitsJSON struct {
	plainLimits
	Timeout Duration `json:"timeout"`
}

type plainLimits Limits

// MarshalJSON writes the timeout as a string such as "30s".
func (l Limits) MarshalJSON() ([]byte, error) {
	return json.Marshal(limitsJSON{plainLimits: plainLimits(l), Timeout: Duration(l.Timeout)})
}

// UnmarshalJSON reads the timeout as a string or, from older callers, as nanoseconds.
func (l *Limits) UnmarshalJSON(b []byte) error {
	return UnmarshalVia(b, l, "guard: limits", func(w limitsJSON) Limits {
		v := Limits(w.plainLimits)
		v.Timeout = time.Duration(w.Timeout)
		return v
	})
}

// UnmarshalVia decodes b as the wire form W and stores in *dst what conv makes of it: the
// UnmarshalJSON of a type whose JSON differs from its Go value (durations as strings). what
// prefixes a decoding error.
func UnmarshalVia[W, T any](b []byte, dst *T, what string, conv func(W) T) error {
	var w W
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	*dst = conv(w)
	return nil
}

// EncodingBase64 names how file contents are encoded in JSON.
const EncodingBase64 = "base64"

type plainFile File

type fileJSON struct {
	plainFile
	Encoding string `json:"encoding,omitempty"`
}

// MarshalJSON writes the content as base64 and names the encoding ("encoding": "base64").
func (f File) MarshalJSON() ([]byte, error) {
	w := fileJSON{plainFile: plainFile(f)}
	if f.Content != nil {
		w.Encoding = EncodingBase64
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a file whose content is base64; an encoding other than base64 is refused.
func (f *File) UnmarshalJSON(b []byte) error {
	var w fileJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("guard: file: %w", err)
	}
	if w.Encoding != "" && !strings.EqualFold(w.Encoding, EncodingBase64) {
		return fmt.Errorf("guard: file %q: encoding %q is not %q", w.Name, w.Encoding, EncodingBase64)
	}
	*f = File(w.plainFile)
	return nil
}

type plainResult Result

// resultJSON is the wire form of Result: output as UTF-8 text, the duration as a string and in
// milliseconds.
type resultJSON struct {
	plainResult
	Stdout     string          `json:"stdout"`
	Stderr     string          `json:"stderr"`
	Duration   json.RawMessage `json:"duration"`
	DurationMS int64           `json:"duration_ms"`
}

// MarshalJSON writes stdout and stderr as UTF-8 strings (invalid bytes replaced by U+FFFD, and
// stdout_binary or stderr_binary set when that happened), file contents as base64, and the
// duration both as a string ("1.5s") and as duration_ms.
func (r Result) MarshalJSON() ([]byte, error) {
	dur, err := Duration(r.Duration).MarshalJSON()
	if err != nil {
		return nil, err
	}
	w := resultJSON{plainResult: plainResult(r), Duration: dur, DurationMS: r.Duration.Milliseconds()}
	w.Stdout, w.StdoutBinary = textOf(r.Stdout, r.StdoutBinary)
	w.Stderr, w.StderrBinary = textOf(r.Stderr, r.StderrBinary)
	return json.Marshal(w)
}

// textOf returns b as valid UTF-8 and whether bytes had to be replaced (or already were).
func textOf(b []byte, wasBinary bool) (string, bool) {
	if utf8.Valid(b) {
		return string(b), wasBinary
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), true
}

// UnmarshalJSON reads both shapes: the current one (output as text, duration as a string) and the
// older one in which the duration was a number of nanoseconds and stdout and stderr were base64.
func (r *Result) UnmarshalJSON(b []byte) error {
	var w resultJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("guard: result: %w", err)
	}
	*r = Result(w.plainResult)
	old := isJSONNumber(w.Duration)
	if len(w.Duration) > 0 {
		var d Duration
		if err := d.UnmarshalJSON(w.Duration); err != nil {
			return fmt.Errorf("guard: result: %w", err)
		}
		r.Duration = time.Duration(d)
	} else if w.DurationMS != 0 {
		r.Duration = time.Duration(w.DurationMS) * time.Millisecond
	}
	if !old {
		r.Stdout, r.Stderr = textBytes(w.Stdout), textBytes(w.Stderr)
		return nil
	}
	// The older shape: []byte fields in Go's default encoding (base64).
	var legacy struct {
		Stdout []byte `json:"stdout"`
		Stderr []byte `json:"stderr"`
	}
	if err := json.Unmarshal(b, &legacy); err != nil {
		return fmt.Errorf("guard: result in the older shape: %w", err)
	}
	r.Stdout, r.Stderr = legacy.Stdout, legacy.Stderr
	return nil
}

// textBytes keeps an empty output nil, as Go's default encoding did.
func textBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}
