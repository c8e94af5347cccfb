// Watch a run's output live through sandboxflow's run_code tool with the official MCP SDK: while
// the approved code runs, each progress notification carries the output printed since the last
// one ("live stdout (unsigned): ..." or "live stderr (unsigned): ...", escaped text, "[N bytes
// skipped]" where the server's reader missed some: a worker's report, not the signed result). Each notification is printed as it comes, with the time it arrived; the tool's
// result is printed as one JSON line.
//
//   node dist/live.js ../../bin/starter mcp --task-queue sandboxflow
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const code = [
  "import time",
  "for i in range(1, 11):",
  "    print('line %d at %.3f' % (i, time.time()), flush=True)",
  "    if i == 2:",
  "        print('red \\x1b[31mX\\x1b[0m title \\x1b]0;pwned\\x07', flush=True)",
  "    time.sleep(0.3)",
  "",
].join("\n");

async function main(): Promise<void> {
  const [command, ...args] = process.argv.slice(2);
  if (!command) {
    throw new Error("usage: live.js COMMAND [ARG...]");
  }
  const client = new Client({ name: "sandboxflow-live-example", version: "0.1.0" });
  await client.connect(new StdioClientTransport({ command, args, stderr: "inherit" }));
  const result = await client.callTool({ name: "run_code", arguments: { code } }, undefined, {
    onprogress: (p) => console.log("PROGRESS " + JSON.stringify({ at: Date.now() / 1000, message: p.message ?? "" })),
    timeout: 60_000,
    resetTimeoutOnProgress: true,
    maxTotalTimeout: 10 * 60_000,
  });
  console.log("RESULT " + JSON.stringify(result));
  await client.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
