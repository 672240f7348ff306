/** `import p from "x.gguf" with { type: "file" }`: Bun gives the file's path (a $bunfs path inside a compiled binary). */
declare module "*.gguf" {
  const path: string;
  export default path;
}
