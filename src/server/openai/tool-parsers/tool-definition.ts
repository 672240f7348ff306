/** A request's tool, as OpenAI sends it: `{type: "function", function: {name, description?, parameters?, strict?}}`. */
export interface ToolDefinition {
  readonly type: string;
  readonly function: {
    readonly name: string;
    readonly description?: string;
    readonly parameters?: Readonly<Record<string, unknown>>;
    readonly strict?: boolean;
  };
}

/** JSON-schema type of one parameter of one tool ("string" when unknown), for parsers that write values untyped. */
export function parameterType(tools: readonly ToolDefinition[], toolName: string, parameter: string): string | null {
  const tool = tools.find((t) => t.function.name === toolName);
  const properties = tool?.function.parameters?.["properties"] as Record<string, { type?: unknown; anyOf?: unknown }> | undefined;
  const schema = properties?.[parameter];
  if (schema === undefined) return null;
  if (typeof schema.type === "string") return schema.type;
  if (Array.isArray(schema.type)) return String(schema.type.find((t) => t !== "null") ?? "string");
  return "string";
}
