// An MCP server over the HTTP+SSE transport of 2024-11-05, built on @modelcontextprotocol/sdk
// 1.0.1 (the alias mcp-sdk-2024-11-05: its Server and SSEServerTransport, LATEST 2024-11-05),
// served by node's http on 127.0.0.1 (tests/test_interop_legacy_sse.py).
//
//   GET  /sse                      the event stream (SSEServerTransport: endpoint event first)
//   POST /messages?sessionId=...   each client message (202 "Accepted")
//   POST /sse                      405, as a server with a GET-only SSE route answers the POST
//                                  of initialize a Streamable HTTP client sends first
//   GET  /stats                    what arrived: {"posts": {method: n}, "refused": [[m, path, status]]}
//
// Tools: echo, progress (reports each step to the request's progressToken), roots (asks the
// client roots/list), sample (asks sampling/createMessage), log (a notifications/message),
// drop (ends the event stream without answering), big (a result of `size` characters).
// Prints "PORT <n>" once listening.
import http from "node:http";
import { Server } from "mcp-sdk-2024-11-05/server/index.js";
import { SSEServerTransport } from "mcp-sdk-2024-11-05/server/sse.js";
import {
  CallToolRequestSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  LATEST_PROTOCOL_VERSION,
} from "mcp-sdk-2024-11-05/types.js";

const transports = new Map();
const posts = {};
const refused = [];

const TOOLS = [
  { name: "echo", description: "Echo the text", inputSchema: { type: "object", properties: { text: { type: "string" } } } },
  { name: "progress", description: "Report steps", inputSchema: { type: "object", properties: { steps: { type: "number" } } } },
  { name: "roots", description: "List the client's roots", inputSchema: { type: "object", properties: {} } },
  { name: "sample", description: "Ask the client's model", inputSchema: { type: "object", properties: { prompt: { type: "string" } } } },
  { name: "log", description: "Send a log message", inputSchema: { type: "object", properties: { text: { type: "string" } } } },
  { name: "drop", description: "End the event stream without answering", inputSchema: { type: "object", properties: {} } },
  { name: "big", description: "A result of size characters", inputSchema: { type: "object", properties: { size: { type: "number" } } } },
];

function makeServer(transport) {
  const server = new Server(
    { name: "legacy-sse-server", version: "1.0.1" },
    { capabilities: { tools: {}, resources: {}, prompts: {}, logging: {} } },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const args = request.params.arguments ?? {};
    const text = (value) => ({ content: [{ type: "text", text: value }] });
    switch (request.params.name) {
      case "echo":
        return text(String(args.text ?? ""));
      case "progress": {
        const token = request.params._meta?.progressToken;
        const steps = Number(args.steps ?? 3);
        for (let i = 1; i <= steps; i++) {
          if (token !== undefined) {
            await server.notification({
              method: "notifications/progress",
              params: { progressToken: token, progress: i, total: steps },
            });
          }
        }
        return text(`did ${steps} steps`);
      }
      case "roots": {
        const answer = await server.listRoots();
        return text(JSON.stringify(answer.roots));
      }
      case "sample": {
        const answer = await server.createMessage({
          messages: [{ role: "user", content: { type: "text", text: String(args.prompt ?? "") } }],
          maxTokens: 10,
        });
        return text(answer.content.text);
      }
      case "log":
        await server.sendLoggingMessage({ level: "info", logger: "legacy", data: String(args.text ?? "") });
        return text("logged");
      case "drop":
        transport.res.socket?.destroy();
        return new Promise(() => {}); // never answers
      case "big":
        return text("x".repeat(Number(args.size ?? 1000)));
      default:
        throw new Error(`unknown tool ${request.params.name}`);
    }
  });
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: [{ uri: "note://hello", name: "hello", mimeType: "text/plain" }],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => ({
    contents: [{ uri: request.params.uri, mimeType: "text/plain", text: `the note ${request.params.uri}` }],
  }));
  server.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: [{ name: "greet", description: "Greet someone", arguments: [{ name: "name", required: true }] }],
  }));
  server.setRequestHandler(GetPromptRequestSchema, async (request) => ({
    messages: [
      { role: "user", content: { type: "text", text: `Hello, ${request.params.arguments?.name}!` } },
    ],
  }));
  return server;
}

function count(message) {
  const key = message.method ?? "response";
  posts[key] = (posts[key] ?? 0) + 1;
}

const httpServer = http.createServer(async (req, res) => {
  const url = new URL(req.url, "http://127.0.0.1");
  if (req.method === "GET" && url.pathname === "/sse") {
    const transport = new SSEServerTransport("/messages", res);
    transports.set(transport.sessionId, transport);
    res.on("close", () => transports.delete(transport.sessionId));
    await makeServer(transport).connect(transport);
    const deliver = transport.onmessage; // count every message the SDK accepted from a POST
    transport.onmessage = (message) => {
      count(message);
      deliver(message);
    };
    return;
  }
  if (req.method === "POST" && url.pathname === "/messages") {
    const transport = transports.get(url.searchParams.get("sessionId"));
    if (transport === undefined) {
      refused.push([req.method, url.pathname, 404]);
      res.writeHead(404).end("no such session");
      return;
    }
    await transport.handlePostMessage(req, res);
    return;
  }
  if (req.method === "GET" && url.pathname === "/stats") {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ posts, refused, version: LATEST_PROTOCOL_VERSION, sessions: transports.size }));
    return;
  }
  const status = url.pathname === "/sse" ? 405 : 404;
  refused.push([req.method, url.pathname, status]);
  req.resume();
  res.writeHead(status, status === 405 ? { Allow: "GET" } : {}).end(
    status === 405 ? "Method Not Allowed" : "Not Found",
  );
});

httpServer.listen(0, "127.0.0.1", () => {
  process.stdout.write(`PORT ${httpServer.address().port}\n`);
});
process.on("SIGTERM", () => process.exit(0));
