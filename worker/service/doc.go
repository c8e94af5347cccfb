// Package service assembles a sandboxflow worker from its Options: the configured backend and its
// reaper, the policy, payload encryption and the codec server, the embedded Temporal server for
// Dev, the Temporal workers on the workflow and sandbox task queues, and the doctor's checks. The
// worker command parses flags into Options and calls New, then Serve or Doctor.
package service
