// Package e2e is sandboxflow's end-to-end suite (integration tests only): it builds the worker
// and starter binaries and drives them as a user does, against in-process Temporal servers, the
// real Docker daemon and its runtimes, PostgreSQL, chromium and the hosted-backend fakes. It has
// no code of its own.
package e2e
