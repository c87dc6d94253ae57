// The start-up reference: the smallest MCP server a user writes with the SDK, loaded from
// node_modules as usual (one tool, the SDK's own stdio transport).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import * as z from 'zod';

const server = new McpServer({ name: 'minimal', version: '1.0.0' });
server.registerTool('echo', { description: 'Echo.', inputSchema: { text: z.string() } }, async ({ text }) => ({
  content: [{ type: 'text', text }],
}));
await server.connect(new StdioServerTransport());
