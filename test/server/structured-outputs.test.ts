/**
 * The structured-output request surface (HTTP app on the fake orchestrator, which records what reaches the engine):
 * response_format, structured_outputs and the guided_* aliases become one GrammarSpec; every bad constraint is a 400
 * naming the field, decided before any engine work (xgrammar itself checks schemas, regexes and grammars).
 */
import { describe, expect, test } from "bun:test";
import { testServer, type Json } from "./helpers.ts";

const chat = (extra: Json): Json => ({ messages: [{ role: "user", content: "hi" }], max_tokens: 4, ...extra });
const completion = (extra: Json): Json => ({ prompt: "hi", max_tokens: 4, ...extra });
const SCHEMA = { type: "object", properties: { a: { type: "integer" } }, required: ["a"] };

describe("a constraint reaches the engine as one grammar", () => {
  const cases: [string, Json, Json][] = [
    ["response_format json_schema", { response_format: { type: "json_schema", json_schema: { name: "x", schema: SCHEMA, strict: true } } }, { kind: "json", schema: JSON.stringify(SCHEMA), anyWhitespace: true }],
    ["response_format json_object", { response_format: { type: "json_object" } }, { kind: "json_object", anyWhitespace: true }],
    ["structured_outputs.json (object)", { structured_outputs: { json: SCHEMA } }, { kind: "json", schema: JSON.stringify(SCHEMA), anyWhitespace: true }],
    ["structured_outputs.json (JSON text), compact", { structured_outputs: { json: JSON.stringify(SCHEMA), disable_any_whitespace: true } }, { kind: "json", schema: JSON.stringify(SCHEMA), anyWhitespace: false }],
    ["structured_outputs.regex", { structured_outputs: { regex: "[0-9]+" } }, { kind: "regex", pattern: "[0-9]+" }],
    ["structured_outputs.choice", { structured_outputs: { choice: ["a", "b"] } }, { kind: "choice", choices: ["a", "b"] }],
    ["structured_outputs.grammar", { structured_outputs: { grammar: 'root ::= "x"' } }, { kind: "grammar", ebnf: 'root ::= "x"' }],
    ["structured_outputs.json_object", { structured_outputs: { json_object: true } }, { kind: "json_object", anyWhitespace: true }],
    ["guided_json (pre-0.12 alias)", { guided_json: SCHEMA }, { kind: "json", schema: JSON.stringify(SCHEMA), anyWhitespace: true }],
    ["guided_regex", { guided_regex: "[a-z]" }, { kind: "regex", pattern: "[a-z]" }],
    ["guided_choice + guided_decoding_backend xgrammar", { guided_choice: ["x"], guided_decoding_backend: "xgrammar" }, { kind: "choice", choices: ["x"] }],
    ["guided_grammar", { guided_grammar: 'root ::= "y"' }, { kind: "grammar", ebnf: 'root ::= "y"' }],
  ];
  test.each(cases)("chat and completions: %s", async (_name, fields, spec) => {
    const s = testServer();
    for (const [path, body] of [["/v1/chat/completions", chat(fields)], ["/v1/completions", completion(fields)]] as const) {
      const res = await s.call("POST", path, body);
      expect(res.status).toBe(200);
      expect(s.fake.requests.at(-1)!.sampling.structuredOutputs).toEqual(spec as never);
    }
  });

  test("--structured-outputs-config disable_any_whitespace makes JSON compact for every request", async () => {
    const s = testServer({ structuredOutputs: { disableAnyWhitespace: true } });
    expect((await s.call("POST", "/v1/completions", completion({ response_format: { type: "json_object" } }))).status).toBe(200);
    expect(s.fake.requests.at(-1)!.sampling.structuredOutputs).toEqual({ kind: "json_object", anyWhitespace: false });
  });
});

describe("a bad constraint is a 400 naming the field, and the engine never sees it", () => {
  const cases: [string, Json, string, string][] = [
    ["invalid regex", { structured_outputs: { regex: "[0-9" } }, "structured_outputs.regex", "Failed to transform regex into a grammar: Regex parsing error at position 5: Unclosed '['"],
    ["invalid EBNF", { structured_outputs: { grammar: "root ::= nope" } }, "structured_outputs.grammar", 'Invalid grammar specification. EBNF parser error at line 1, column 10: Rule "nope" is not defined'],
    ["schema that is not JSON", { structured_outputs: { json: "{bad" } }, "structured_outputs.json", "Invalid JSON grammar specification."],
    ["schema xgrammar cannot enforce (multipleOf)", { response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "integer", multipleOf: 3 } } } }, "response_format", "The provided JSON schema contains features not supported by xgrammar: multipleOf."],
    ["a number range that holds no number", { guided_json: { type: "number", minimum: 2, exclusiveMaximum: 2 } }, "guided_json", "Failed to transform json schema into a grammar: minimum and exclusiveMaximum leave no number in the range"],
    ["a range bound that is not a number", { guided_json: { type: "integer", maximum: "9" } }, "guided_json", 'Failed to transform json schema into a grammar: maximum must be a number, got "9"'],
    ["json_schema without json_schema", { response_format: { type: "json_schema" } }, "response_format", "When response_format type is 'json_schema', the 'json_schema' field must be provided."],
    ["unknown response_format type", { response_format: { type: "yaml" } }, "response_format", 'response_format type must be one of "text", "json_object", "json_schema", "structural_tag", got "yaml".'],
    ["two kinds", { structured_outputs: { regex: "a", choice: ["a"] } }, "structured_outputs.choice", "You can only use one kind of structured outputs constraint but multiple are specified"],
    ["response_format over structured_outputs of another kind", { response_format: { type: "json_object" }, structured_outputs: { regex: "a" } }, "response_format", "multiple are specified"],
    ["empty choice", { structured_outputs: { choice: [] } }, "structured_outputs.choice", "Choice '[]' cannot be an empty list"],
    ["empty grammar", { structured_outputs: { grammar: "" } }, "structured_outputs.grammar", "structured_outputs.grammar cannot be an empty string"],
    ["json_object false", { structured_outputs: { json_object: false } }, "structured_outputs.json_object", "structured_outputs.json_object must be True if set"],
    ["NUL in a regex", { structured_outputs: { regex: "a\u0000" } }, "structured_outputs.regex", "must not contain a NUL character"],
    ["whitespace_pattern (outlines only)", { structured_outputs: { json_object: true, whitespace_pattern: "[ ]?" } }, "structured_outputs.whitespace_pattern", "not supported by the xgrammar backend"],
    ["another backend", { guided_choice: ["a"], guided_decoding_backend: "outlines" }, "guided_decoding_backend", "Request-level structured output backend selection is not supported."],
    ["alias and field both set", { guided_regex: "a", structured_outputs: { regex: "b" } }, "guided_regex", "both set"],
    ["options without a constraint", { structured_outputs: { disable_any_whitespace: true } }, "structured_outputs", "You must use one kind of structured outputs constraint but none are specified"],
    ["bad structural tag", { response_format: { type: "structural_tag", format: { type: "nope" } } }, "response_format", "Invalid structural tag specification."],
  ];
  test.each(cases)("%s", async (_name, fields, param, message) => {
    const s = testServer();
    for (const [path, body] of [["/v1/chat/completions", chat(fields)], ["/v1/completions", completion(fields)]] as const) {
      const res = await s.call("POST", path, body);
      const json = (await res.json()) as Json;
      expect(res.status).toBe(400);
      expect(json.error.param).toBe(param);
      expect(json.error.message).toContain(message);
    }
    expect(s.fake.requests).toHaveLength(0);
  });

  test("a failure does not poison the checker: the next good grammar passes", async () => {
    const s = testServer();
    for (let i = 0; i < 5; i++) expect((await s.call("POST", "/v1/completions", completion({ structured_outputs: { grammar: `root ::= r${i}` } }))).status).toBe(400);
    expect((await s.call("POST", "/v1/completions", completion({ structured_outputs: { grammar: 'root ::= "ok"' } }))).status).toBe(200);
  });
});
