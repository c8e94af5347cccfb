package workflows

// Workflow event types, written with the workflow's replay-safe logger (message and "event"
// attribute).
const (
	EventApprovalRequested = "approval.requested"
	EventApprovalGranted   = "approval.granted"
	EventApprovalDenied    = "approval.denied"
	EventApprovalExpired   = "approval.expired"
	EventApprovalRejected  = "approval.rejected"
)
