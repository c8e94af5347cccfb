package mcpserver

import "github.com/sandboxflow/sandboxflow/client"

// RunCodeArguments are a run_code call's: the code, its language where more than one is offered,
// and the model's input files (client.ToolArguments).
type RunCodeArguments = client.ToolArguments
