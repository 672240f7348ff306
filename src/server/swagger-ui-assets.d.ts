// Swagger UI's and ReDoc's files, embedded with `with { type: "file" }` (a path that also works inside the compiled binary).
declare module "swagger-ui-dist/swagger-ui-bundle.js" { const path: string; export default path; }
declare module "swagger-ui-dist/swagger-ui.css" { const path: string; export default path; }
declare module "redoc/bundles/redoc.standalone.js" { const path: string; export default path; }
