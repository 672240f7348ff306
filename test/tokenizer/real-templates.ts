/**
 * The conversation every real chat template must render: a system prompt, two user turns, an assistant
 * tool call and its tool result, with one tool defined. The call id is 9 alphanumerics because Mistral's templates
 * refuse any other shape.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { llamaModelsDir } from "../../scripts/llama-vocab.ts";
import type { ChatMessage } from "../../src/tokenizer/tokenizer.ts";

export const WEATHER_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", description: "City name" } }, required: ["city"] },
  },
};

export const TOOL_CONVERSATION: ChatMessage[] = [
  { role: "system", content: "You are a helpful assistant." },
  { role: "user", content: "Hello!" },
  { role: "assistant", content: "Hi, how can I help?" },
  { role: "user", content: "What is the weather in Paris?" },
  { role: "assistant", content: null, tool_calls: [{ id: "call12345", type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Paris\"}" } }] },
  { role: "tool", tool_call_id: "call12345", content: "{\"temperature_c\": 21}" },
];

/** Every `models/templates/*.jinja` of the llama.cpp tree node-llama-cpp ships, by name. */
export function realTemplateNames(): string[] {
  return readdirSync(join(llamaModelsDir(), "templates")).filter((f) => f.endsWith(".jinja")).map((f) => f.slice(0, -6)).sort();
}
