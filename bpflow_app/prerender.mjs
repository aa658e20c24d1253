// The build's pages drawn in one language (bpflow_app/prerender.py, run from .web/):
//   <runtime> prerender.mjs CODE STATIC_DIR OUT_DIR PAGES_JSON
// PAGES_JSON: {path: file} ("spa": the shell of pages without their own HTML). Each page is
// rendered by the server bundle the build prerendered with, as React Router's prerendering
// asks for it. When OUT_DIR is STATIC_DIR the drawings are compared with the build's files
// (written nowhere); else written there, `<html lang>` set to CODE. Prints
// {"same": [...], "written": [...]}.
import { createRequestHandler } from "react-router";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [code, staticDir, outDir, pagesJson] = process.argv.slice(2);
const pages = JSON.parse(pagesJson);
const compare = resolve(outDir) === resolve(staticDir);
// read by the compiled initial state (utils/context.jsx) when the bundle is loaded
globalThis.__bpflowLang = code;
const build = await import(pathToFileURL(join(process.cwd(), "build/server/index.js")).href);
const handler = createRequestHandler(build, "production");

const same = [];
const written = [];
for (const [path, file] of Object.entries(pages)) {
  const request = path === "spa"
    ? new Request("http://localhost/", { headers: { "X-React-Router-SPA-Mode": "yes" } })
    : new Request("http://localhost" + path);
  const response = await handler(request);
  if (response.status !== 200) continue;
  const html = await response.text();
  if (compare) {
    if (html === await readFile(join(staticDir, file), "utf8")) same.push(path);
    continue;
  }
  const start = '<!DOCTYPE html><html lang="en"';
  if (!html.startsWith(start)) continue;  // not a page as React Router draws one
  const target = join(outDir, file);
  await mkdir(dirname(target), { recursive: true });
  await writeFile(target, `<!DOCTYPE html><html lang="${code}"` + html.slice(start.length));
  written.push(path);
}
console.log(JSON.stringify({ same, written }));
