package guard

import (
	"slices"
	"unicode/utf8"
)

// CheckEncodable reports a ToolUsageError for a request that cannot cross Temporal byte for byte:
// code, language, an env name or value, an input file name or metadata that is not valid UTF-8.
// JSON would replace such bytes with U+FFFD, so what ran would not be what was sent. Clients call
// it before they encode a request; Check refuses the same bytes when it meets them raw.
func CheckEncodable(req Request) error {
	if !utf8.ValidString(req.Code) {
		return toolUsagef("code is not valid UTF-8 (first bad byte at offset %d); send text, or an input file for binary data", invalidOffset(req.Code))
	}
	if !utf8.ValidString(req.Language) {
		return toolUsagef("language %q is not valid UTF-8", req.Language)
	}
	for _, name := range sortedKeys(req.Files) {
		if !utf8.ValidString(name) {
			return toolUsagef("input file name %q is not valid UTF-8", name)
		}
	}
	for _, name := range sortedKeys(req.Env) {
		if !utf8.ValidString(name) {
			return toolUsagef("env name %q is not valid UTF-8", name)
		}
		if !utf8.ValidString(req.Env[name]) {
			return toolUsagef("env %s: value is not valid UTF-8", name)
		}
	}
	m := req.Metadata
	if slices.ContainsFunc([]string{m.Agent, m.Session, m.ToolCallID, m.RequestedBy}, func(s string) bool { return !utf8.ValidString(s) }) {
		return toolUsagef("metadata is not valid UTF-8")
	}
	return nil
}

// invalidOffset returns the offset of the first byte of s that is not valid UTF-8, or -1.
func invalidOffset(s string) int {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return -1
}
