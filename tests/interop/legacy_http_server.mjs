// A 2025-03-26 server over Streamable HTTP on @modelcontextprotocol/sdk 1.12.3 (the npm alias
// mcp-sdk-2025-03-26), for tests/test_interop_legacy_http.py. Stateful sessions, one
// StreamableHTTPServerTransport per session; run under tests/interop/bind-localhost.cjs, which
// binds 127.0.0.1 and announces the port. Every request's method, MCP headers and JSON-RPC
// method are appended as one JSON line to the file named by SNODO_HEADERS_FILE.
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import { Server } from "mcp-sdk-2025-03-26/server/index.js";
import { StreamableHTTPServerTransport } from "mcp-sdk-2025-03-26/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
} from "mcp-sdk-2025-03-26/types.js";

const HEADERS_FILE = process.env.SNODO_HEADERS_FILE;

function build() {
  const server = new Server(
    { name: "snodo-legacy-2025-03-26", version: "1.12.3" },
    { capabilities: { tools: {}, resources: {}, prompts: {} } },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      { name: "echo", inputSchema: { type: "object", properties: { text: { type: "string" } } } },
      { name: "count", inputSchema: { type: "object", properties: { steps: { type: "integer" } } } },
      { name: "client", inputSchema: { type: "object", properties: {} } },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const args = request.params.arguments ?? {};
    if (request.params.name === "echo") return { content: [{ type: "text", text: String(args.text) }] };
    if (request.params.name === "count") {
      const steps = Number(args.steps ?? 3);
      const token = request.params._meta?.progressToken;
      for (let i = 1; i <= steps; i++) {
        if (token !== undefined) {
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken: token, progress: i, total: steps },
          });
        }
      }
      return { content: [{ type: "text", text: `counted ${steps}` }] };
    }
    if (request.params.name === "client") {
      return { content: [{ type: "text", text: JSON.stringify(server.getClientCapabilities() ?? null) }] };
    }
    throw new Error(`unknown tool ${request.params.name}`);
  });
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: [{ uri: "legacy://note", name: "note", mimeType: "text/plain" }],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => ({
    contents: [{ uri: request.params.uri, mimeType: "text/plain", text: "an old note" }],
  }));
  server.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: [{ name: "greet", arguments: [{ name: "who", required: true }] }],
  }));
  server.setRequestHandler(GetPromptRequestSchema, async (request) => ({
    messages: [
      { role: "user", content: { type: "text", text: `Hello, ${request.params.arguments?.who}` } },
    ],
  }));
  return server;
}

const sessions = new Map();

function record(req, body) {
  if (!HEADERS_FILE) return;
  const headers = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (name.startsWith("mcp-")) headers[name] = value;
  }
  const method = body && !Array.isArray(body) ? body.method ?? null : null;
  fs.appendFileSync(HEADERS_FILE, JSON.stringify({ http: req.method, method, headers }) + "\n");
}

const httpServer = http.createServer(async (req, res) => {
  let body;
  if (req.method === "POST") {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  }
  record(req, body);
  const id = req.headers["mcp-session-id"];
  let transport = id ? sessions.get(id) : undefined;
  if (!transport) {
    if (req.method !== "POST" || body?.method !== "initialize") {
      res.writeHead(id ? 404 : 400).end();
      return;
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => sessions.set(sid, transport),
    });
    transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
    await build().connect(transport);
  }
  await transport.handleRequest(req, res, body);
});

httpServer.listen(0);
