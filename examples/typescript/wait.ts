// Give run_code a CSV as an input file and wait, in the same call, for as long as a person takes
// to approve it: the request keeps the SDK's default timeout (60 s), and each progress
// notification the server sends (every few seconds while the run waits) starts it again
// (resetTimeoutOnProgress). One call, one result, no polling turns.
//
//   node dist/wait.js ../../bin/starter mcp --task-queue sandboxflow --inbox-url http://127.0.0.1:8080
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

// About 100 KB of CSV: too large to paste into the code (64 KiB), fine as an input file.
function salesCSV(): { csv: string; rows: number; total: number } {
  const lines = ["region,amount"];
  let total = 0;
  for (let i = 0; lines.join("\n").length < 100 * 1024 && i < 20000; i++) {
    lines.push(`region-${i % 7},${i}`);
    total += i;
  }
  return { csv: lines.join("\n") + "\n", rows: lines.length - 1, total };
}

const code = [
  "import csv",
  "rows = list(csv.DictReader(open('sales.csv')))",
  "print(len(rows), sum(int(r['amount']) for r in rows))",
  "",
].join("\n");

async function main(): Promise<void> {
  const [command, ...args] = process.argv.slice(2);
  if (!command) {
    throw new Error("usage: wait.js COMMAND [ARG...]");
  }
  const client = new Client({ name: "sandboxflow-wait-example", version: "0.1.0" });
  await client.connect(new StdioClientTransport({ command, args, stderr: "inherit" }));

  const { csv, rows, total } = salesCSV();
  console.log("EXPECT " + JSON.stringify({ rows, total, bytes: csv.length }));
  const began = Date.now();
  let calls = 0;
  let progress = 0;
  calls++;
  const result = await client.callTool({ name: "run_code", arguments: { code, input_files: { "sales.csv": csv } } }, undefined, {
    // No timeout: the SDK's default (60 s) applies to each stretch between two notifications.
    resetTimeoutOnProgress: true,
    onprogress: (p) => {
      progress++;
      console.log("PROGRESS " + JSON.stringify(p.message ?? ""));
    },
  });
  console.log("RESULT " + JSON.stringify({ calls, progress, seconds: (Date.now() - began) / 1000, result }));
  await client.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
