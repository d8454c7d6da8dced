// The operator's console at /console: one server-rendered page, a stylesheet and a small client
// script, served as they are (nothing to build). The page holds no data and no secret; the script
// asks for the admin token, keeps it in the tab's session storage and calls the admin API with it
// in the Authorization header (src/http/middleware/api-guards.ts lets the console's own origin
// through only with that header). Everything the API returns is put on the page as text, never
// as markup; the Content-Security-Policy allows no inline script and no other origin.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Hono } from "hono";
import { html } from "hono/html";

const asset = (name: string) => readFileSync(new URL(name, import.meta.url), "utf8");
const script = asset("./console.js");
const styles = asset("./console.css");
// uPlot (MIT, a small canvas chart library) draws the overview's pictures. It is served from here,
// read from the installed package as it is, so the page needs no other origin and the CSP stays
// `script-src 'self'`; it writes labels with textContent and styles through the CSSOM only.
const installed = (file: string) =>
  readFileSync(createRequire(import.meta.url).resolve(`uplot/dist/${file}`), "utf8");
const uplotScript = installed("uPlot.esm.js");
const uplotStyles = installed("uPlot.min.css");

const securityHeaders = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cache-control": "no-store",
};

const page = html`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>peergate console</title>
    <link rel="stylesheet" href="/console/uplot.css" />
    <link rel="stylesheet" href="/console/console.css" />
    <script type="module" src="/console/console.js"></script>
  </head>
  <body>
    <a class="skip" href="#main">Skip to content</a>
    <header>
      <h1>peergate</h1>
      <nav aria-label="Sections" id="nav" hidden>
        <a href="#/overview">Overview</a>
        <a href="#/callers">Callers</a>
        <a href="#/runs">Runs</a>
        <a href="#/approvals">Approvals</a>
        <a href="#/audit">Audit</a>
        <button type="button" id="sign-out">Sign out</button>
      </nav>
    </header>
    <div id="status" role="status" aria-live="polite"></div>
    <main id="main" tabindex="-1">
      <noscript>The console needs JavaScript. The CLI (peergate --help) does everything it does.</noscript>
    </main>
  </body>
</html>`;

export function consoleRoutes(): Hono {
  const app = new Hono();
  app.get("/", (c) => c.html(page, 200, securityHeaders));
  app.get("/console.js", (c) =>
    c.body(script, 200, { ...securityHeaders, "content-type": "text/javascript; charset=utf-8" }),
  );
  app.get("/console.css", (c) =>
    c.body(styles, 200, { ...securityHeaders, "content-type": "text/css; charset=utf-8" }),
  );
  app.get("/uplot.js", (c) =>
    c.body(uplotScript, 200, {
      ...securityHeaders,
      "content-type": "text/javascript; charset=utf-8",
    }),
  );
  app.get("/uplot.css", (c) =>
    c.body(uplotStyles, 200, { ...securityHeaders, "content-type": "text/css; charset=utf-8" }),
  );
  return app;
}
