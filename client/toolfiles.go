package client

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"unicode/utf8"

	"github.com/sandboxflow/sandboxflow/guard"
)

// InputFile is one file a model gives a tool (run_code, open_session): a JSON string is its UTF-8 text,
// {"base64": "..."} its bytes (for binary files).
type InputFile []byte

// UnmarshalJSON reads a string as UTF-8 text and {"base64": ...} as standard base64.
func (f *InputFile) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte(`"`)) {
		var text string
		if err := json.Unmarshal(b, &text); err != nil {
			return err
		}
		*f = InputFile(text)
		return nil
	}
	var enc struct {
		Base64 *string `json:"base64"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&enc); err != nil || enc.Base64 == nil {
		return fmt.Errorf("an input file is a string of UTF-8 text or {\"base64\": \"...\"}")
	}
	raw, err := base64.StdEncoding.DecodeString(*enc.Base64)
	if err != nil {
		return fmt.Errorf("an input file's base64: %w", err)
	}
	*f = raw
	return nil
}

// InputFilesSchema is the JSON Schema of a tool's input_files argument.
func InputFilesSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"description": "Optional: files written into the working folder before the code starts, by relative name (\"data/sales.csv\"). " +
			"Give data here rather than pasting it into the code: a file's value is its UTF-8 text as a string, or {\"base64\": \"...\"} for binary. " +
			"The reviewer sees them with the code; the operator's policy caps how many and how large.",
		"additionalProperties": map[string]any{"anyOf": []any{
			map[string]any{"type": "string", "description": "The file's UTF-8 text."},
			map[string]any{"type": "object", "properties": map[string]any{
				"base64": map[string]any{"type": "string", "contentEncoding": "base64", "description": "The file's bytes, standard base64."},
			}, "required": []string{"base64"}, "additionalProperties": false},
		}},
	}
}

// WithInputFiles is the operator's files with the model's added: a name the operator's files
// already hold, or text that is not UTF-8, is a ToolUsageError. Names and sizes are checked with
// the rest of the request (guard.Policy), whose refusals are typed too.
func WithInputFiles(operator map[string][]byte, model map[string]InputFile) (map[string][]byte, error) {
	if len(model) == 0 {
		return operator, nil
	}
	files := maps.Clone(operator)
	if files == nil {
		files = make(map[string][]byte, len(model))
	}
	for name, content := range model {
		if _, ok := files[name]; ok {
			return nil, &guard.ToolUsageError{Msg: fmt.Sprintf("input file %q is the operator's; give yours another name", name)}
		}
		if !utf8.ValidString(name) {
			return nil, &guard.ToolUsageError{Msg: fmt.Sprintf("input file name %q is not UTF-8", name)}
		}
		files[name] = []byte(content)
	}
	return files, nil
}
