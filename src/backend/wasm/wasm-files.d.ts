/** `import path from "x.wasm" with { type: "file" }` gives the file's path (a /$bunfs path inside the binary). */
declare module "*.wasm" {
  const path: string;
  export default path;
}
