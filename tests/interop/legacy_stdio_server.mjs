// A 2024-11-05 server over stdio on @modelcontextprotocol/sdk 1.0.1 (the npm alias
// mcp-sdk-2024-11-05), for tests/test_interop_legacy_stdio.py. It speaks only 2024-11-05 (and
// 2024-10-07): whatever version the client proposes, it answers initialize with 2024-11-05.
//
// Tools: "echo" (text back), "count" (reports `steps` progress notifications to the caller's
// progressToken, then answers), "client" (the client's capabilities and version as it declared
// them in initialize, as JSON text). One resource (legacy://note), one prompt (greet).
import { Server } from "mcp-sdk-2024-11-05/server/index.js";
import { StdioServerTransport } from "mcp-sdk-2024-11-05/server/stdio.js";
import {
  CallToolRequestSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
} from "mcp-sdk-2024-11-05/types.js";

const server = new Server(
  { name: "snodo-legacy-2024-11-05", version: "1.0.1" },
  { capabilities: { tools: {}, resources: {}, prompts: {} } },
);

const TOOLS = [
  {
    name: "echo",
    description: "Echo the text back",
    inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  },
  {
    name: "count",
    description: "Report progress for each step, then answer",
    inputSchema: { type: "object", properties: { steps: { type: "integer" } } },
  },
  {
    name: "client",
    description: "The client's declared capabilities and version",
    inputSchema: { type: "object", properties: {} },
  },
];

server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const args = request.params.arguments ?? {};
  switch (request.params.name) {
    case "echo":
      return { content: [{ type: "text", text: String(args.text) }] };
    case "count": {
      const steps = Number(args.steps ?? 3);
      const token = request.params._meta?.progressToken;
      for (let i = 1; i <= steps; i++) {
        if (token !== undefined) {
          await server.notification({
            method: "notifications/progress",
            params: { progressToken: token, progress: i, total: steps },
          });
        }
      }
      return { content: [{ type: "text", text: `counted ${steps}` }] };
    }
    case "client":
      return {
        content: [
          {
            type: "text",
            text: JSON.stringify({
              capabilities: server.getClientCapabilities() ?? null,
              clientInfo: server.getClientVersion() ?? null,
            }),
          },
        ],
      };
    default:
      throw new Error(`unknown tool ${request.params.name}`);
  }
});

server.setRequestHandler(ListResourcesRequestSchema, async () => ({
  resources: [{ uri: "legacy://note", name: "note", mimeType: "text/plain" }],
}));

server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
  if (request.params.uri !== "legacy://note") throw new Error(`no resource ${request.params.uri}`);
  return { contents: [{ uri: "legacy://note", mimeType: "text/plain", text: "an old note" }] };
});

server.setRequestHandler(ListPromptsRequestSchema, async () => ({
  prompts: [{ name: "greet", description: "Greet someone", arguments: [{ name: "who", required: true }] }],
}));

server.setRequestHandler(GetPromptRequestSchema, async (request) => {
  if (request.params.name !== "greet") throw new Error(`no prompt ${request.params.name}`);
  const who = request.params.arguments?.who ?? "nobody";
  return {
    description: "A greeting",
    messages: [{ role: "user", content: { type: "text", text: `Hello, ${who}` } }],
  };
});

await server.connect(new StdioServerTransport());
