// Call sandboxflow's run_code tool from TypeScript with the official MCP SDK, as an agent's host
// would: over stdio (the SDK starts `starter mcp`) or over streamable HTTP (`starter mcp --http`).
// Each progress notification (it names the run and where a reviewer decides) is printed as it
// comes; the tool's result is printed as one JSON line. SANDBOXFLOW_EXAMPLE_CODE, when set, is
// the Python code run_code runs instead of the example's own.
//
//   node dist/mcp.js stdio ../../bin/starter mcp --task-queue sandboxflow
//   node dist/mcp.js http http://127.0.0.1:8765/mcp
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";

const code = process.env.SANDBOXFLOW_EXAMPLE_CODE ?? [
  "print('hello from an MCP client')",
  "open('report.txt', 'w').write('a report\\n')",
  "",
].join("\n");

function transport(argv: string[]): Transport {
  const [kind, target, ...rest] = argv;
  if (kind === "stdio" && target) {
    return new StdioClientTransport({ command: target, args: rest, stderr: "inherit" });
  }
  if (kind === "http" && target) {
    return new StreamableHTTPClientTransport(new URL(target));
  }
  throw new Error("usage: mcp.js stdio COMMAND [ARG...] | mcp.js http URL");
}

async function main(): Promise<void> {
  const client = new Client({ name: "sandboxflow-mcp-example", version: "0.1.0" });
  await client.connect(transport(process.argv.slice(2)));
  console.log("SERVER " + JSON.stringify(client.getServerVersion()));

  const { tools } = await client.listTools();
  console.log("TOOLS " + JSON.stringify(tools.map((t) => ({ name: t.name, input: t.inputSchema }))));

  // A person decides while the call waits: progress keeps the request alive meanwhile.
  const result = await client.callTool({ name: "run_code", arguments: { code } }, undefined, {
    onprogress: (p) => console.log("PROGRESS " + JSON.stringify(p.message ?? "")),
    timeout: 60_000,
    resetTimeoutOnProgress: true,
    maxTotalTimeout: 10 * 60_000,
  });
  console.log("RESULT " + JSON.stringify(result));

  const wrong = await client.callTool({ name: "run_code", arguments: { code: "echo hi", language: "cobol" } });
  console.log("REFUSED " + JSON.stringify(wrong));
  await client.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
