// `npx tsx bench/run-mcp.ts`: only the MCP figures.
import { mcpBench } from './mcp.ts';

await mcpBench();
