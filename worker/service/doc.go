// Package service assembles a sandboxflow worker from its Options: the configured backend and its
// reaper, the policy, payload encryption and the codec server, the embedded Temporal server for
// Dev, the Temporal workers on the workflow and sandbox task queues, and the doctor's checks. The
// worker command parses flags into Options (BackendFlags adds each backend kind's) and calls New,
// then Serve or Doctor.
//
// Backends are one table, backendKinds (kinds.go): each kind's entry, beside its wiring
// (docker.go, hosted.go, local.go), holds its flags and nested options, checks, build and
// reaper, doctor lines, egress support and metrics label. Nothing else here names a backend.
package service
