/**
 * Golden tests of the tool-call parsers on their models' formats (cases written from the formats, after reading
 * vLLM's tests/tool_parsers/*): single and several calls, content before a call, unclosed last calls, malformed calls
 * (returned as content), and each case streamed at every split point and one character at a time.
 */
import { describe, expect, test } from "bun:test";
import { hermesToolParser } from "../../../src/server/openai/tool-parsers/hermes.ts";
import { llama3JsonToolParser } from "../../../src/server/openai/tool-parsers/llama3-json.ts";
import { mistralToolParser } from "../../../src/server/openai/tool-parsers/mistral.ts";
import { pythonicToolParser } from "../../../src/server/openai/tool-parsers/pythonic.ts";
import { qwen3CoderToolParser } from "../../../src/server/openai/tool-parsers/qwen3-coder.ts";
import { TOOL_PARSERS } from "../../../src/server/openai/tool-parsers/registry.ts";
import { pythonJsonDumps, scanJsonValue } from "../../../src/server/openai/tool-parsers/tool-parser.ts";
import type { ToolDefinition } from "../../../src/server/openai/tool-parsers/tool-definition.ts";
import { checkGolden, streamed } from "./stream-helpers.ts";

const WEATHER = { name: "get_weather", arguments: { city: "Paris" } };

describe("hermes", () => {
  const p = hermesToolParser;
  test("one call, nothing around it", () => checkGolden(p, { text: '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>', content: "", calls: [WEATHER] }));
  test("content, then two calls", () => checkGolden(p, {
    text: 'Let me check both.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "Europe/Paris", "hours": [1, 2]}}\n</tool_call>',
    content: "Let me check both.\n",
    calls: [WEATHER, { name: "get_time", arguments: { zone: "Europe/Paris", hours: [1, 2] } }],
  }));
  test("the last call left unclosed (the model stopped at </tool_call>'s token)", () => checkGolden(p, { text: '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}', content: "", calls: [WEATHER] }));
  test("braces and tags inside argument strings", () => checkGolden(p, {
    text: '<tool_call>{"name": "run", "arguments": {"code": "if (a) { b(\\"}\\") } <tag>"}}</tool_call>',
    content: "", calls: [{ name: "run", arguments: { code: 'if (a) { b("}") } <tag>' } }],
  }));
  test("arguments before the name, and arguments written as a JSON string", () => {
    checkGolden(p, { text: '<tool_call>{"arguments": {"city": "Paris"}, "name": "get_weather"}</tool_call>', content: "", calls: [WEATHER] });
    checkGolden(p, { text: '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}</tool_call>', content: "", calls: [WEATHER] });
  });
  test("malformed calls are content", () => {
    for (const text of ['<tool_call>{"name": "get_weather", "arguments": {"city": }}</tool_call>', "<tool_call>not json</tool_call>", '<tool_call>{"arguments": {}}</tool_call>', 'Hi <tool_call>{"name": "x", "arguments": {"a": 1}} trailing</tool_call>']) {
      checkGolden(p, { text, content: text, calls: [] });
    }
  });
  test("plain text, and a '<' that is not a tag", () => {
    checkGolden(p, { text: "The weather is fine.", content: "The weather is fine.", calls: [] });
    checkGolden(p, { text: "a <tool and <b>", content: "a <tool and <b>", calls: [] });
  });
});

describe("llama3_json", () => {
  const p = llama3JsonToolParser;
  test("one call with `parameters`", () => checkGolden(p, { text: '{"name": "get_weather", "parameters": {"city": "Paris"}}', content: "", calls: [WEATHER] }));
  test("python tag and two calls separated by ';'", () => checkGolden(p, {
    text: '<|python_tag|>{"name": "get_weather", "arguments": {"city": "Paris"}}; {"name": "get_time", "arguments": {}}',
    content: "", calls: [WEATHER, { name: "get_time", arguments: {} }],
  }));
  test("leading whitespace", () => checkGolden(p, { text: ' \n{"name": "get_weather", "parameters": {"city": "Paris"}}', content: "", calls: [WEATHER] }));
  test("text that does not start with a call is content", () => {
    checkGolden(p, { text: 'Sure: {"name": "get_weather", "parameters": {}}', content: 'Sure: {"name": "get_weather", "parameters": {}}', calls: [] });
    checkGolden(p, { text: "<b>bold</b>", content: "<b>bold</b>", calls: [] });
  });
  test("malformed or unfinished JSON, or no name, is content", () => {
    for (const text of ['{"name": "get_weather", "parameters": {"city": "Par', '{"foo": 1}', '{"name": 3, "parameters": {}}']) checkGolden(p, { text, content: text, calls: [] });
  });
});

describe("pythonic", () => {
  const p = pythonicToolParser;
  test("one call", () => checkGolden(p, { text: '[get_weather(city="Paris")]', content: "", calls: [WEATHER] }));
  test("two calls with every literal kind", () => checkGolden(p, {
    text: "[get_weather(city='Paris', days=3), get_time(zone=\"UTC\", offset=-1.5, flags=[True, False, None], opts={'a': (1, 2)}, note='it\\'s')]",
    content: "", calls: [{ name: "get_weather", arguments: { city: "Paris", days: 3 } }, { name: "get_time", arguments: { zone: "UTC", offset: -1.5, flags: [true, false, null], opts: { a: [1, 2] }, note: "it's" } }],
  }));
  test("no arguments, and Llama 4's python_start wrapper", () => {
    checkGolden(p, { text: "[get_time()]", content: "", calls: [{ name: "get_time", arguments: {} }] });
    checkGolden(p, { text: '<|python_start|>[get_weather(city="Paris")]<|python_end|>', content: "", calls: [WEATHER] });
  });
  test("not a call list, or malformed, is content", () => {
    for (const text of ['get_weather(city="Paris")', '[get_weather(city=)]', '[get_weather(city="Paris")', "[1, 2]", '[get_weather("Paris")]', '[get_weather(city=open("x"))]', "Here: [f()]"]) {
      checkGolden(p, { text, content: text, calls: [] });
    }
  });
});

describe("mistral", () => {
  const p = mistralToolParser;
  const ID = /^[A-Za-z0-9]{9}$/;
  test("JSON list after [TOOL_CALLS] (tokenizers before v11)", () => checkGolden(p, {
    text: '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {"zone": "UTC"}}]',
    content: "", calls: [WEATHER, { name: "get_time", arguments: { zone: "UTC" } }],
  }, [], ID));
  test("v11 form name[ARGS]{...}, one [TOOL_CALLS] per call, content before", () => checkGolden(p, {
    text: 'Checking.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}',
    content: "Checking.", calls: [WEATHER, { name: "get_time", arguments: {} }],
  }, [], ID));
  test("malformed is content", () => {
    for (const text of ['[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": }}]', "[TOOL_CALLS]get_weather", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"} and more']) {
      checkGolden(p, { text, content: text, calls: [] }, [], ID);
    }
  });
});

describe("qwen3_coder / qwen3_xml", () => {
  const p = qwen3CoderToolParser;
  const tools: ToolDefinition[] = [{
    type: "function",
    function: { name: "plan_trip", parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" }, budget: { type: "number" }, hotel: { type: "boolean" }, stops: { type: "array" }, note: { type: "string" } } } },
  }, { type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];
  test("one call, values converted by the parameter's schema type", () => checkGolden(p, {
    text: "<tool_call>\n<function=plan_trip>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=budget>\n120.5\n</parameter>\n<parameter=hotel>\ntrue\n</parameter>\n<parameter=stops>\n[\"Lyon\", \"Nice\"]\n</parameter>\n<parameter=note>\n42\n</parameter>\n</function>\n</tool_call>",
    content: "", calls: [{ name: "plan_trip", arguments: { city: "Paris", days: 3, budget: 120.5, hotel: true, stops: ["Lyon", "Nice"], note: "42" } }],
  }, tools));
  test("content, two calls, a multi-line value", () => checkGolden(p, {
    text: "I will look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=plan_trip>\n<parameter=note>\nline one\nline two\n</parameter>\n</function>\n</tool_call>",
    content: "I will look.\n", calls: [WEATHER, { name: "plan_trip", arguments: { note: "line one\nline two" } }],
  }, tools));
  test("unclosed parameter and function at the end", () => checkGolden(p, { text: "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis", content: "", calls: [WEATHER] }, tools));
  test("malformed is content", () => {
    for (const text of ["<tool_call>\nnot a function\n</tool_call>", "<tool_call>\n<function=get_weather"]) checkGolden(p, { text, content: text, calls: [] }, tools);
  });
});

describe("shared pieces", () => {
  test("the registry has vLLM's names", () => {
    for (const name of ["hermes", "llama3_json", "llama4_json", "pythonic", "mistral", "qwen3_coder", "qwen3_xml"]) expect(TOOL_PARSERS[name]).toBeDefined();
  });
  test("pythonJsonDumps writes Python's json.dumps separators, keeps non-ASCII", () => {
    expect(pythonJsonDumps({ a: [1, "é"], b: { c: null, d: true } })).toBe('{"a": [1, "é"], "b": {"c": null, "d": true}}');
  });
  test("scanJsonValue: complete, partial and invalid values", () => {
    expect(scanJsonValue('{"a": "}"} x', 0)).toEqual({ end: 10, complete: true, valid: true });
    expect(scanJsonValue('{"a": [1, ', 0).complete).toBe(false);
    expect(scanJsonValue("]", 0).valid).toBe(false);
    expect(scanJsonValue("tr", 0)).toEqual({ end: 2, complete: false, valid: true });
  });
  test("parallel_tool_calls false: the streamer keeps only the first call", () => {
    const { ToolCallStreamer } = require("../../../src/server/openai/tool-parsers/tool-parser.ts") as typeof import("../../../src/server/openai/tool-parsers/tool-parser.ts");
    const s = new ToolCallStreamer(hermesToolParser, [], true);
    const text = '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {}}</tool_call>';
    const deltas = s.push(text, true);
    expect(deltas.flatMap((d) => d.tool_calls ?? []).every((c) => c.index === 0)).toBe(true);
    expect(streamed(hermesToolParser, [text]).calls.length).toBe(2);
  });
});
