/**
 * Every error path of every dialect answers in that dialect's own error shape, with its status, before any stream
 * starts (app.handle on the fake orchestrator): the Responses API in OpenAI's (`{error: {message, type, param,
 * code}}`), Anthropic Messages in Anthropic's (`{type: "error", error: {type, message}, request_id}`), Ollama's routes
 * in Ollama's (`{error: "..."}`). The paths: a body that is not JSON, not an object, a missing required field, a
 * field of the wrong type, an unknown model, a prompt over the context (plain and streamed), an image on a model
 * served without a vision projector (each dialect's image reaches the chat path's check, which names --mmproj) and a
 * missing API key.
 */
import { describe, expect, test } from "bun:test";
import { testServer, type Json } from "./helpers.ts";

const IMAGE = "iVBORw0KGgo=";
const LONG = "a ".repeat(2000);

/** Anthropic's error types by status (docs.claude.com "Errors"). */
const ANTHROPIC_TYPES: Readonly<Record<number, string>> = { 400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error" };

interface Dialect {
  readonly name: string;
  readonly path: string;
  /** a valid body */
  readonly ok: Json;
  /** the body without a required field, and what the message names */
  readonly missing: readonly [Json, string];
  /** the body with a field of the wrong type, and what the message names */
  readonly wrongType: readonly [Json, string];
  /** the body with a prompt over the context */
  readonly long: (stream: boolean) => Json;
  /** the body with an image (the fake model has no projector), and what the message names */
  readonly image: readonly [Json, string];
  /** checks the error shape; returns the message */
  readonly shape: (status: number, json: Json) => string;
}

function openaiShape(status: number, json: Json): string {
  expect(Object.keys(json)).toEqual(["error"]);
  expect(Object.keys(json.error).sort()).toEqual(["code", "message", "param", "type"]);
  expect(json.error.code).toBe(status);
  expect(typeof json.error.type).toBe("string");
  return json.error.message;
}

function anthropicShape(status: number, json: Json): string {
  expect(Object.keys(json).sort()).toEqual(["error", "request_id", "type"]);
  expect(json.type).toBe("error");
  expect(Object.keys(json.error).sort()).toEqual(["message", "type"]);
  expect(json.error.type).toBe(ANTHROPIC_TYPES[status]!);
  expect(json.request_id).toMatch(/^req_/);
  return json.error.message;
}

function ollamaShape(_status: number, json: Json): string {
  expect(Object.keys(json)).toEqual(["error"]);
  expect(typeof json.error).toBe("string");
  return json.error;
}

const user = (content: unknown) => [{ role: "user", content }];

const DIALECTS: readonly Dialect[] = [
  {
    name: "Responses", path: "/v1/responses", shape: openaiShape,
    ok: { model: "fake-model", input: "hi", max_output_tokens: 3 },
    missing: [{ model: "fake-model", max_output_tokens: 3 }, "'input' is required"],
    wrongType: [{ model: "fake-model", input: "hi", max_output_tokens: "three" }, "max_output_tokens"],
    long: (stream) => ({ model: "fake-model", input: LONG, max_output_tokens: 3, stream }),
    image: [{ model: "fake-model", input: [{ role: "user", content: [{ type: "input_image", image_url: `data:image/png;base64,${IMAGE}` }] }] }, "--mmproj"],
  },
  {
    name: "Anthropic Messages", path: "/v1/messages", shape: anthropicShape,
    ok: { model: "fake-model", max_tokens: 3, messages: user("hi") },
    missing: [{ model: "fake-model", messages: user("hi") }, "max_tokens: Field required"],
    wrongType: [{ model: "fake-model", max_tokens: "three", messages: user("hi") }, "max_tokens"],
    long: (stream) => ({ model: "fake-model", max_tokens: 3, messages: user(LONG), stream }),
    image: [{ model: "fake-model", max_tokens: 3, messages: user([{ type: "image", source: { type: "base64", media_type: "image/png", data: IMAGE } }]) }, "--mmproj"],
  },
  {
    name: "Ollama /api/chat", path: "/api/chat", shape: ollamaShape,
    ok: { model: "fake-model", messages: user("hi"), stream: false, options: { num_predict: 3 } },
    missing: [{ messages: user("hi"), stream: false }, "model is required"],
    wrongType: [{ model: "fake-model", messages: user("hi"), stream: false, options: { temperature: "hot" } }, "temperature"],
    long: (stream) => ({ model: "fake-model", messages: user(LONG), stream }),
    image: [{ model: "fake-model", messages: [{ role: "user", content: "hi", images: [IMAGE] }], stream: false }, "--mmproj"],
  },
  {
    name: "Ollama /api/generate", path: "/api/generate", shape: ollamaShape,
    ok: { model: "fake-model", prompt: "hi", stream: false, options: { num_predict: 3 } },
    missing: [{ prompt: "hi", stream: false }, "model is required"],
    wrongType: [{ model: "fake-model", prompt: 7, stream: false }, "prompt"],
    long: (stream) => ({ model: "fake-model", prompt: LONG, stream }),
    image: [{ model: "fake-model", prompt: "hi", images: [IMAGE], stream: false }, "--mmproj"],
  },
];

for (const d of DIALECTS) {
  describe(`${d.name}: every error in its own shape`, () => {
    const s = testServer({}, { maxModelLen: 512 });
    const expectError = async (res: Response, status: number, mentions: string) => {
      expect(res.status).toBe(status);
      expect(res.headers.get("content-type")).toContain("application/json");
      const message = d.shape(status, (await res.json()) as Json);
      expect(message).toContain(mentions);
    };

    test("the valid body is answered (the cases below differ from it in one thing)", async () => {
      expect((await s.call("POST", d.path, d.ok)).status).toBe(200);
    });

    test("a body that is not JSON, and JSON that is not an object: 400", async () => {
      await expectError(await s.call("POST", d.path, "{not json"), 400, "not valid JSON");
      await expectError(await s.call("POST", d.path, [1, 2]), 400, "JSON object");
    });

    test("a missing required field, a field of the wrong type: 400 naming it", async () => {
      await expectError(await s.call("POST", d.path, d.missing[0]), 400, d.missing[1]);
      await expectError(await s.call("POST", d.path, d.wrongType[0]), 400, d.wrongType[1]);
    });

    test("an unknown model: 404", async () => {
      await expectError(await s.call("POST", d.path, { ...d.ok, model: "no-such-model" }), 404, "no-such-model");
    });

    test("a prompt over the context: 400, streamed or not (the stream never starts)", async () => {
      await expectError(await s.call("POST", d.path, d.long(false)), 400, "512");
      await expectError(await s.call("POST", d.path, d.long(true)), 400, "512");
    });

    test("an image on a model without a projector: a 400 naming --mmproj", async () => {
      await expectError(await s.call("POST", d.path, d.image[0]), 400, d.image[1]);
      expect(s.fake.requests.every((r) => r.promptTokenIds.length < 100)).toBe(true);
    });
  });
}

test("a missing API key: 401 in each dialect's shape, Ollama's routes guarded too; x-api-key (Anthropic's) and Bearer accepted", async () => {
  const s = testServer({ apiKey: "k" });
  for (const d of DIALECTS) {
    const res = await s.call("POST", d.path, d.ok);
    expect(res.status).toBe(401);
    const json = (await res.json()) as Json;
    if (d.shape === ollamaShape) ollamaShape(401, json);
    else if (d.shape === anthropicShape) anthropicShape(401, json);
    else expect(json.error).toBeDefined();
  }
  expect((await s.call("POST", "/v1/messages", DIALECTS[1]!.ok, { "x-api-key": "k" })).status).toBe(200);
  for (const d of DIALECTS) expect((await s.call("POST", d.path, d.ok, { authorization: "Bearer k" })).status).toBe(200);
});

test("Responses: a top-level field no schema row names is answered and logged with vLLM's line (as vLLM does)", async () => {
  const s = testServer();
  const res = await s.call("POST", "/v1/responses", { model: "fake-model", input: "hi", max_output_tokens: 2, not_a_field: 1 });
  expect(res.status).toBe(200);
  expect(s.logs).toContain("The following fields were present in the request but ignored: {'not_a_field'}");
});
