// Drive a sandboxflow session from TypeScript with the official MCP SDK, as an agent's host
// would: open_session, three run_cell calls in the same sandbox (a Python variable kept from one
// cell to the next, a file a Python cell wrote read by an sh cell), then close_session. A person
// approves each cell while its call waits; progress notifications say where. Each step is
// printed as one line: SESSION, PROGRESS, CELL <n> (the call's content blocks and structured
// result), CLOSED. SANDBOXFLOW_EXAMPLE_CELLS, when set, is the cells to run instead, as JSON:
// [{"language": "python", "code": "..."}, ...].
//
//   node dist/session.js ../../bin/starter mcp --languages python,sh --task-queue sandboxflow
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

type Cell = { code: string; language: string };

const exampleCells: Cell[] = [
  { language: "python", code: "x = 41\nopen('answer.txt', 'w').write('forty-two\\n')\n" },
  { language: "python", code: "print(x + 1)\n" },
  { language: "sh", code: "cat answer.txt\n" },
];

const cells: Cell[] = process.env.SANDBOXFLOW_EXAMPLE_CELLS ? JSON.parse(process.env.SANDBOXFLOW_EXAMPLE_CELLS) : exampleCells;

async function main(): Promise<void> {
  const [command, ...args] = process.argv.slice(2);
  if (!command) {
    throw new Error("usage: session.js STARTER mcp [FLAG...]");
  }
  const client = new Client({ name: "sandboxflow-session-example", version: "0.1.0" });
  await client.connect(new StdioClientTransport({ command, args, stderr: "inherit" }));

  const opened = await client.callTool({ name: "open_session", arguments: { max_cells: 5, idle_timeout: "5m" } });
  if (opened.isError) {
    throw new Error("open_session: " + JSON.stringify(opened.content));
  }
  const session = opened.structuredContent as { session_id: string };
  console.log("SESSION " + JSON.stringify(opened.structuredContent));

  for (const [i, cell] of cells.entries()) {
    // A person decides while the call waits: progress keeps the request alive meanwhile.
    const result = await client.callTool(
      { name: "run_cell", arguments: { session_id: session.session_id, ...cell } },
      undefined,
      {
        onprogress: (p) => console.log("PROGRESS " + JSON.stringify(p.message ?? "")),
        timeout: 60_000,
        resetTimeoutOnProgress: true,
        maxTotalTimeout: 10 * 60_000,
      },
    );
    console.log(`CELL ${i + 1} ` + JSON.stringify({ isError: result.isError ?? false, content: result.content, result: result.structuredContent }));
  }

  const closed = await client.callTool({ name: "close_session", arguments: { session_id: session.session_id } });
  console.log("CLOSED " + JSON.stringify(closed.structuredContent));
  await client.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
