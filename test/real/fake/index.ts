export { startFakeAnthropic } from './anthropic.ts';
export { startFakeResponses } from './responses.ts';
export { startFakeOpenAIChat } from './openai-chat.ts';
export { parseLine, lastPrompt } from './script.ts';
export type { Action, FakeServer, Line, ModelRequest, Script, ToolResult } from './script.ts';
