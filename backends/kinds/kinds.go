// Package kinds names the kinds of backend and says what a model is told about each: the part of
// the worker's backend table (worker/service) that clients read. It imports nothing, so a client
// (the tool schema, the MCP server) learns a backend's note without importing a backend or the
// worker's assembly.
package kinds

// Names of the backend kinds, as --backend takes them and as runs record them (a backend's name
// is part of every digest it runs).
const (
	// Docker runs code in hardened containers under runc or gVisor (backends/docker).
	Docker = "docker"
	// E2B runs code in E2B cloud sandboxes (backends/e2b).
	E2B = "e2b"
	// HTTP posts code to the operator's own code-execution service (backends/httpservice).
	HTTP = "http"
	// Local runs code as a plain process of the worker: DEVELOPMENT ONLY, nothing is isolated
	// (backends/local).
	Local = "local"
)

// LocalWarning is the local backend's note when the caller gives none of its own.
const LocalWarning = "DEVELOPMENT ONLY: this sandbox is a plain local process; nothing is isolated."

// ModelNote returns what a model is told about where its code runs under the backend named name,
// to be appended to the tool's description; "" when there is nothing to add (docker, or a name
// not listed here).
func ModelNote(name string) string {
	switch name {
	case Local:
		return "WARNING: " + LocalWarning
	case E2B:
		return "Each run gets a fresh E2B cloud sandbox (a microVM) that is deleted afterwards: nothing persists between runs."
	case HTTP:
		return "The code runs on the operator's own code-execution service; nothing persists between runs unless that service keeps it."
	}
	return ""
}
