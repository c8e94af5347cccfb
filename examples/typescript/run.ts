// Start a sandboxflow RunCode run from TypeScript, print the statement a reviewer signs, and read
// the result. Every duration in the JSON is a string in Go's syntax ("20s"); stdout and stderr are
// UTF-8 text; produced files are base64 (see docs/schema/).
//
//   TEMPORAL_ADDRESS=127.0.0.1:7233 SANDBOXFLOW_TASK_QUEUE=sandboxflow npm start
import { randomUUID } from "node:crypto";
import { ApplicationFailure, Client, Connection, WorkflowFailedError } from "@temporalio/client";

// Status is what the query "status" returns (docs/schema/status.schema.json), in part.
interface Status {
  state: string;
  request: { digest: string; limits: { timeout: string } };
  approval_deadline?: string;
  sandbox_task_queue?: string;
  statement_version?: number;
}

// Result is what the workflow returns (docs/schema/result.schema.json), in part.
interface Result {
  outcome: string;
  ok: boolean;
  exit_code: number;
  stdout: string;
  stderr: string;
  stdout_binary?: boolean;
  files?: { name: string; size: number; content?: string; encoding?: string }[];
  duration: string;
  duration_ms: number;
}

const address = process.env.TEMPORAL_ADDRESS ?? "127.0.0.1:7233";
const namespace = process.env.TEMPORAL_NAMESPACE ?? "default";
const taskQueue = process.env.SANDBOXFLOW_TASK_QUEUE ?? "sandboxflow";

// reviewer is the principal the reviewer signs as (one their key's reviewers-file line allows).
const reviewer = process.env.SANDBOXFLOW_REVIEWER ?? process.env.USER ?? "reviewer";

// statement is approval.Fields.Statement(): the bytes a reviewer signs with ssh-keygen -Y sign
// -n sandboxflow-approval. The approval id and the expiry are the reviewer's choice. Version 2
// (status statement_version 2) names the reviewer; version 1, of runs checked before it, does not.
function statement(workflowId: string, runId: string, digest: string, sandboxTaskQueue: string, version: number): string {
  const expires = new Date(Date.now() + 10 * 60 * 1000).toISOString().replace(/\.\d+Z$/, "Z");
  return [
    `sandboxflow-approval-statement v${version}`,
    `workflow_id: ${workflowId}`,
    `run_id: ${runId}`,
    `digest: ${digest}`,
    "decision: approve",
    `approval_id: ${randomUUID()}`,
    `sandbox_task_queue: ${sandboxTaskQueue}`,
    ...(version >= 2 ? [`reviewer: ${reviewer}`] : []),
    `expires: ${expires}`,
    "",
  ].join("\n");
}

async function waitChecked(query: () => Promise<Status>): Promise<Status> {
  for (;;) {
    try {
      const st = await query();
      if (st.state !== "checking") return st;
    } catch {
      // The first workflow task has not run yet.
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function main(): Promise<number> {
  const connection = await Connection.connect({ address });
  const client = new Client({ connection, namespace });
  const workflowId = `sandbox-${randomUUID()}`;
  const handle = await client.workflow.start("RunCode", {
    taskQueue,
    workflowId,
    args: [{
      request: {
        code: "print('hello from typescript')\nopen('answer.txt', 'w').write('42')\n",
        language: "python",
        limits: { timeout: "20s" },
        metadata: { agent: "typescript-example" },
      },
    }],
  });
  const st = await waitChecked(() => handle.query<Status>("status"));
  const runId = handle.firstExecutionRunId;
  console.log("STARTED " + JSON.stringify({ workflow_id: workflowId, run_id: runId, state: st.state, digest: st.request.digest, timeout: st.request.limits.timeout }));
  if (st.state === "awaiting_approval") {
    console.log("A reviewer signs this statement (or runs `starter statement " + workflowId + " --reviewer " + reviewer + "`):");
    process.stdout.write(statement(workflowId, runId, st.request.digest, st.sandbox_task_queue ?? taskQueue, st.statement_version ?? 1));
  }
  try {
    const res = await handle.result() as Result;
    console.log("RESULT " + JSON.stringify(res));
    return res.ok ? 0 : 1;
  } catch (err) {
    if (err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure) {
      console.log("ERROR " + JSON.stringify({ type: err.cause.type, message: err.cause.message }));
      return 1;
    }
    throw err;
  }
}

main().then((code) => process.exit(code), (err) => { console.error(err); process.exit(2); });
