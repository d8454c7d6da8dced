// The console's client: plain DOM, no framework. Every value from the API goes onto the page as
// text (textContent, attribute values), never as markup: caller names, tool arguments and model
// output are hostile. The admin token lives in this tab's session storage and travels only in the
// Authorization header; the operator token is asked for on each approval and never stored.
const api = "/admin/v1";
const tokenKey = "peergate.adminToken";
const main = document.getElementById("main");
const nav = document.getElementById("nav");
const status = document.getElementById("status");

/** h("p", {class: "x"}, "text", child…): an element; strings become text nodes. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Puts `nodes` in <main>, skipping empty ones (replaceChildren would print "null"). */
function show(...nodes) {
  for (const chart of charts) chart.destroy();
  charts = [];
  main.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined && n !== false));
}

const token = () => sessionStorage.getItem(tokenKey);
const say = (text) => {
  status.textContent = text;
};

class ApiProblem extends Error {
  constructor(status, body) {
    super(body?.detail ?? body?.title ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function call(method, path, body, headers = {}) {
  const res = await fetch(api + path, {
    method,
    headers: {
      authorization: `Bearer ${token()}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let parsed = {};
  try {
    parsed = text ? JSON.parse(text) : {};
  } catch {
    parsed = { detail: text };
  }
  if (res.status === 401 && headers["x-peergate-operator-token"] !== undefined) {
    // The 401 names no token. With the operator token sent it may be that one: ask again with the
    // admin token alone, and sign out only if that is refused too.
    const probe = await fetch(`${api}/callers`, {
      headers: { authorization: `Bearer ${token()}` },
    });
    if (probe.ok) {
      throw new ApiProblem(401, {
        detail:
          "The operator token was refused (wrong, expired or not set). Nothing was changed; you are still signed in.",
      });
    }
  }
  if (res.status === 401) {
    sessionStorage.removeItem(tokenKey);
    signIn("The admin token was refused; sign in again.");
    throw new ApiProblem(401, parsed);
  }
  if (!res.ok && !(path === "/audit/verify" && res.status === 409)) {
    throw new ApiProblem(res.status, parsed);
  }
  return parsed;
}

/** Puts an API problem on a form: each field's message beside its input, the rest on top. */
function showProblem(form, error) {
  for (const old of form.querySelectorAll(".field-error, .notice.error")) old.remove();
  for (const input of form.querySelectorAll("[aria-invalid]"))
    input.removeAttribute("aria-invalid");
  const problems = error.body?.problems ?? [];
  const general = [];
  for (const p of problems) {
    const whole = String(p.field ?? "");
    const top = whole.split(".")[0];
    const input =
      form.querySelector(`[name="${CSS.escape(whole)}"]`) ??
      form.querySelector(`[name="${CSS.escape(top)}"]`);
    if (input) {
      const id = `err-${input.getAttribute("name").replace(/[^A-Za-z0-9_-]/g, "-")}`;
      const msg = h("span", { class: "field-error", id }, p.message);
      input.setAttribute("aria-invalid", "true");
      input.setAttribute("aria-describedby", id);
      input.after(msg);
    } else general.push(p.message);
  }
  const summary = [error.message, ...general].join(" — ");
  form.prepend(h("div", { class: "notice error", role: "alert" }, summary));
}

/** The browser's time zone, named on the page once and in every time shown. */
const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
// (dateStyle and timeStyle cannot be combined with timeZoneName: the parts are named one by one.)
const timeFormat = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  timeZoneName: "short",
});
/** A time as a <time> element: local, with its zone; the exact UTC time on hover. */
const when = (iso) =>
  iso ? h("time", { datetime: iso, title: `${iso} (UTC)` }, timeFormat.format(new Date(iso))) : "—";
/** A duration in seconds, in words: 45 s, 12 min, 3 h 5 min, 2 d 4 h. */
function ago(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}
/** Pagination links under a list: each is a link to another page of it, or nothing. */
const pager = (label, links) =>
  h(
    "nav",
    { class: "pager", "aria-label": label },
    links.filter(Boolean).map(([text, href]) => h("a", { href }, text)),
  );
const table = (headers, rows) =>
  h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      {},
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          headers.map((x) => h("th", { scope: "col" }, x)),
        ),
      ),
      h("tbody", {}, rows),
    ),
  );
const field = (label, input) => {
  const id = `f-${input.getAttribute("name")}-${Math.random().toString(36).slice(2, 7)}`;
  input.id = id;
  return [h("label", { for: id }, label), input];
};
const json = (value) => h("pre", {}, JSON.stringify(value, null, 2));
const list = (text) =>
  String(text ?? "")
    .split(/[\s,]+/)
    .filter(Boolean);

function copyButton(text, label = "Copy") {
  return h(
    "button",
    {
      type: "button",
      onclick: async (e) => {
        try {
          await navigator.clipboard.writeText(text);
          e.target.textContent = "Copied";
        } catch {
          e.target.textContent = "Copy failed: select the text";
        }
      },
    },
    label,
  );
}

// ------------------------------------------------------------------ sign in

function signIn(message) {
  nav.hidden = true;
  const input = h("input", {
    name: "token",
    type: "password",
    autocomplete: "off",
    required: true,
    size: 50,
  });
  const form = h(
    "form",
    {
      onsubmit: async (e) => {
        e.preventDefault();
        sessionStorage.setItem(tokenKey, input.value.trim());
        try {
          await call("GET", "/callers");
          route();
        } catch (error) {
          if (error.status !== 401) showProblem(form, error);
        }
      },
    },
    h("h2", {}, "Sign in"),
    message ? h("div", { class: "notice error", role: "alert" }, message) : null,
    h(
      "p",
      {},
      "Paste the admin token (the file admin-token in the data directory). It stays in this tab only.",
    ),
    field("Admin token", input),
    h("p", {}, h("button", { type: "submit" }, "Sign in")),
  );
  show(form);
  input.focus();
}

// ------------------------------------------------------------------ overview

/** uPlot, loaded from this server the first time the overview is opened. */
let uPlotModule;
const loadUPlot = async () => {
  uPlotModule ??= (await import("/console/uplot.js")).default;
  return uPlotModule;
};
/** The charts on the page, destroyed before the next page replaces them. */
let charts = [];
const numberFormat = new Intl.NumberFormat();
const fmt = (n) => numberFormat.format(Math.round(n * 1000) / 1000);
const dollars = (n) => `$${n.toFixed(n > 0 && n < 0.01 ? 4 : 2)}`;
// Distinct colours that also differ in dash, so no series is told apart by colour alone.
const palette = [
  "#1f5fbf",
  "#c0392b",
  "#1e8449",
  "#7d3c98",
  "#b9770e",
  "#117a8b",
  "#444",
  "#d35400",
  "#888",
];
const dashes = [[], [8, 4], [2, 3], [12, 4, 2, 4], [4, 4], [1, 2], [10, 2], [6, 6], [3, 6]];
const windows = [
  ["1 h", 1],
  ["6 h", 6],
  ["24 h", 24],
  ["7 days", 168],
  ["30 days", 720],
];

/**
 * A time-series chart in a figure: the caption says what it shows and its totals in words, the
 * canvas draws it, and "The numbers" holds the same data as a table.
 */
function chartFigure(id, title, caption, buckets, series, valueFormat = fmt) {
  const box = h("div", { class: "chart", role: "img", "aria-label": `${title}. ${caption}` });
  const totals = series.map((s) => s.values.reduce((a, b) => a + b, 0));
  const numbers = h(
    "details",
    {},
    h("summary", {}, "The numbers"),
    table(
      ["Bucket start", ...series.map((s) => s.label)],
      buckets
        .map((b, i) => [b, i])
        .filter(([, i]) => series.some((s) => s.values[i]))
        .map(([b, i]) =>
          h(
            "tr",
            {},
            h("td", {}, when(b)),
            series.map((s) => h("td", {}, valueFormat(s.values[i]))),
          ),
        ),
    ),
  );
  const figure = h(
    "figure",
    { id },
    h("figcaption", {}, h("strong", {}, title), " — ", caption),
    box,
    numbers,
  );
  const draw = (uPlot) => {
    const width = Math.max(280, Math.min(box.clientWidth || main.clientWidth || 600, 1100));
    const xs = buckets.map((b) => new Date(b).getTime() / 1000);
    const chart = new uPlot(
      {
        width,
        height: 220,
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
        axes: [{}, { values: (_u, ticks) => ticks.map((t) => valueFormat(t)), size: 60 }],
        series: [
          {},
          ...series.map((s, i) => ({
            label: s.label,
            stroke: palette[i % palette.length],
            dash: dashes[i % dashes.length],
            width: 2,
            points: { show: true, size: 5 },
            value: (_u, v) => (v === null || v === undefined ? "—" : valueFormat(v)),
          })),
        ],
      },
      [xs, ...series.map((s) => s.values)],
      box,
    );
    charts.push(chart);
  };
  return { figure, draw, totals };
}

async function overviewPage(params) {
  const hours = Number(params.get("hours")) || 24;
  const [o, uPlot] = await Promise.all([
    call("GET", `/overview?hours=${hours}&buckets=48`),
    loadUPlot(),
  ]);
  const windowLinks = h(
    "nav",
    { class: "pager", "aria-label": "Time window" },
    "Window: ",
    windows.map(([label, value]) =>
      h(
        "a",
        { href: `#/overview?hours=${value}`, "aria-current": value === hours ? "page" : undefined },
        label,
      ),
    ),
  );
  const bucketWords = ago(o.bucketSeconds);
  const callerSeries = (key) =>
    o.runs.length
      ? o.runs.map((s) => ({ label: s.callerName, values: s[key] }))
      : [{ label: "no runs", values: o.buckets.map(() => 0) }];
  const summary = (key, format) =>
    o.runs.length
      ? o.runs.map((s) => `${s.callerName}: ${format(s.total[key])}`).join("; ")
      : "no runs in this window";
  const runsChart = chartFigure(
    "chart-runs",
    "Runs per caller",
    `runs started per ${bucketWords}; ${summary("runs", fmt)}.`,
    o.buckets,
    callerSeries("runs"),
  );
  const tokensChart = chartFigure(
    "chart-tokens",
    "Cost per caller (tokens)",
    `tokens used by the runs started per ${bucketWords}; ${summary("tokens", fmt)}${o.runs.some((s) => s.total.costUsd > 0) ? `; in dollars ${o.runs.map((s) => `${s.callerName} ${dollars(s.total.costUsd)}`).join(", ")}` : ""}.`,
    o.buckets,
    callerSeries("tokens"),
  );
  const refusalSeries = [
    { label: "tool calls refused", values: o.refusals.tools },
    { label: "webhooks refused", values: o.refusals.webhooks },
    { label: "auth failures", values: o.refusals.authFailures },
  ];
  const refusalsChart = chartFigure(
    "chart-refusals",
    "Refusals and authentication failures",
    `per ${bucketWords}; ${refusalSeries.map((s) => `${s.label}: ${fmt(s.values.reduce((a, b) => a + b, 0))}`).join("; ")}.`,
    o.buckets,
    refusalSeries,
  );

  const liveWords = {
    submitted: "Starting",
    working: "Working",
    parked: "Waiting for an operator",
    "input-required": "Waiting for the caller",
  };
  const liveTiles = h(
    "ul",
    { class: "tiles", id: "live-runs" },
    o.live.map((l) =>
      h(
        "li",
        {},
        h("span", { class: "tile-number" }, String(l.count)),
        h("span", {}, liveWords[l.status] ?? l.status),
      ),
    ),
    h(
      "li",
      {},
      h("span", { class: "tile-number" }, String(o.approvals.count)),
      h(
        "span",
        {},
        o.approvals.oldest[0]
          ? `approvals waiting; the oldest for ${ago(o.approvals.oldest[0].ageSeconds)}`
          : "approvals waiting",
      ),
    ),
  );
  const liveTable = o.liveByCaller.length
    ? table(
        ["Caller", "Starting", "Working", "Waiting for an operator", "Waiting for the caller"],
        o.liveByCaller.map((c) =>
          h(
            "tr",
            {},
            h(
              "td",
              {},
              h("a", { href: `#/runs?caller=${encodeURIComponent(c.callerName)}` }, c.callerName),
            ),
            h("td", {}, String(c.submitted)),
            h("td", {}, String(c.working)),
            h("td", {}, String(c.parked)),
            h("td", {}, String(c.inputRequired)),
          ),
        ),
      )
    : h("p", {}, "No run is live.");

  const approvalRows = o.approvals.oldest.map((a) => {
    const total = a.expiresAt
      ? (new Date(a.expiresAt).getTime() - new Date(a.requestedAt).getTime()) / 1000
      : a.ageSeconds;
    return h(
      "tr",
      {},
      h("td", {}, h("a", { href: `#/runs/${a.runId}` }, a.runId.slice(0, 8))),
      h("td", {}, a.callerName),
      h("td", {}, a.tool),
      h(
        "td",
        {},
        h("meter", {
          min: 0,
          max: Math.max(1, total),
          value: a.ageSeconds,
          low: total / 2,
          high: total * 0.8,
          optimum: 0,
          "aria-label": `waiting ${ago(a.ageSeconds)}`,
        }),
        ` ${ago(a.ageSeconds)}`,
        a.expiresAt ? [" · expires ", when(a.expiresAt)] : null,
      ),
      h("td", {}, when(a.requestedAt)),
    );
  });

  const used = (value, limit, format, unit) => {
    if (limit === null || limit === undefined) return [`${format(value)} ${unit} · no limit`];
    const share = limit > 0 ? Math.round((value / limit) * 100) : 0;
    return [
      h("meter", {
        min: 0,
        max: limit,
        value: Math.min(value, limit),
        low: limit * 0.5,
        high: limit * 0.8,
        optimum: 0,
        "aria-label": `${unit}: ${share}% of the limit`,
      }),
      ` ${format(value)} / ${format(limit)} ${unit} (${share}%)`,
    ];
  };
  const budgetRows = o.budgets.callers.map((b) =>
    h(
      "tr",
      {},
      h("td", {}, h("a", { href: `#/callers/${encodeURIComponent(b.callerName)}` }, b.callerName)),
      h("td", {}, used(b.tokens, b.limits.tokens, fmt, "tokens")),
      h("td", {}, used(b.costUsd, b.limits.costUsd, dollars, "")),
      h("td", {}, used(b.runs, b.limits.runs, fmt, "runs")),
      h("td", {}, used(b.running, b.limits.concurrentRuns, fmt, "now")),
    ),
  );

  show(
    h("h2", {}, "Overview"),
    h(
      "p",
      {},
      `The last ${windows.find(([, v]) => v === hours)?.[0] ?? `${hours} h`}, in buckets of ${bucketWords}, up to `,
      when(o.now),
      `. Times are in ${zone}.`,
    ),
    windowLinks,
    h("h3", {}, "Live now"),
    liveTiles,
    liveTable,
    h("div", { class: "charts" }, runsChart.figure, tokensChart.figure, refusalsChart.figure),
    h("h3", { id: "approvals-h" }, `Approvals waiting (${o.approvals.count})`),
    approvalRows.length
      ? table(["Run", "Caller", "Tool", "Waiting (of the time it may wait)", "Asked"], approvalRows)
      : h("p", {}, "Nothing waits for an answer."),
    h("h3", {}, `Budget used today (${o.budgets.day}, UTC) against the daily limits`),
    table(["Caller", "Tokens", "Dollars", "Runs", "Runs at once"], budgetRows),
  );
  for (const c of [runsChart, tokensChart, refusalsChart]) c.draw(uPlot);
}

// ------------------------------------------------------------------ callers

function credentialPanel(credential, kind, name) {
  if (!credential) {
    return h(
      "section",
      { class: "notice" },
      h("p", {}, "No static token: this peer authenticates only with JWTs signed by its key."),
    );
  }
  const settings = [];
  if (kind === "github") {
    settings.push(
      h("li", {}, "Payload URL: ", h("code", {}, `${location.origin}/webhooks/github/${name}`)),
      h("li", {}, "Content type: application/json"),
      h("li", {}, "Secret: the credential above"),
    );
  } else if (kind === "ifttt") {
    settings.push(
      h("li", {}, "Action: Webhooks → Make a web request"),
      h(
        "li",
        {},
        "URL: ",
        h("code", {}, credential.url ?? ""),
        " ",
        copyButton(credential.url ?? "", "Copy URL"),
      ),
      h("li", {}, "Method: POST; content type: application/json"),
    );
  }
  return h(
    "section",
    { class: "notice", "aria-labelledby": "cred-h" },
    h("h3", { id: "cred-h" }, "New credential — shown once"),
    h("p", { class: "secret", id: "credential-secret" }, credential.secret),
    copyButton(credential.secret, "Copy credential"),
    h("p", {}, credential.usage),
    settings.length ? h("ul", {}, settings) : null,
  );
}

const callersPerPage = 50;

async function callersPage(params) {
  const { callers } = await call("GET", "/callers");
  const lastUse = await lastUses();
  const pageNo = Math.max(1, Number(params.get("page")) || 1);
  const pages = Math.max(1, Math.ceil(callers.length / callersPerPage));
  const shown = callers.slice((pageNo - 1) * callersPerPage, pageNo * callersPerPage);
  const rows = shown.map((c) =>
    h(
      "tr",
      {},
      h("td", {}, h("a", { href: `#/callers/${encodeURIComponent(c.name)}` }, c.name)),
      h("td", {}, c.kind),
      h("td", {}, c.tier),
      h("td", {}, c.approvalPolicy),
      h("td", {}, c.revoked ? "revoked" : "active"),
      h("td", {}, when(lastUse.get(c.id))),
    ),
  );
  const form = createForm();
  show(
    h("h2", {}, "Callers"),
    h("p", {}, `${callers.length} callers · page ${pageNo} of ${pages}`),
    table(["Name", "Kind", "Tier", "Approval policy", "State", "Last use"], rows),
    pager("Pages of callers", [
      pageNo > 1 && ["← Previous page", `#/callers?page=${pageNo - 1}`],
      pageNo < pages && ["Next page →", `#/callers?page=${pageNo + 1}`],
    ]),
    form,
  );
}

/** The newest run of each caller, as its last use. */
async function lastUses() {
  const uses = new Map();
  try {
    const { runs } = await call("GET", "/runs?limit=500");
    for (const r of runs) if (!uses.has(r.callerId)) uses.set(r.callerId, r.createdAt);
  } catch {
    // Without a run engine there are no runs to read.
  }
  return uses;
}

function createForm() {
  const name = h("input", { name: "name", required: true, autocomplete: "off" });
  const kind = h(
    "select",
    { name: "kind" },
    ["peer", "github", "ifttt", "webhook"].map((k) => h("option", {}, k)),
  );
  const tier = h(
    "select",
    { name: "tier" },
    ["public", "internal", "private"].map((k) => h("option", {}, k)),
  );
  const allow = h("input", { name: "allow", placeholder: "tool names, comma-separated" });
  const policy = h(
    "select",
    { name: "approvalPolicy" },
    ["auto", "read-only", "low-risk"].map((k) => h("option", {}, k)),
  );
  const prompt = h("textarea", {
    name: "promptTemplate",
    rows: 2,
    placeholder: "webhook callers: the prompt, with {{payload}}",
  });
  const operator = h("input", { name: "operatorToken", type: "password", autocomplete: "off" });
  const out = h("div", { id: "create-result" });
  const form = h(
    "form",
    {
      "aria-labelledby": "create-h",
      onsubmit: async (e) => {
        e.preventDefault();
        const body = {
          name: name.value,
          kind: kind.value,
          tier: tier.value,
          approvalPolicy: policy.value,
        };
        if (allow.value.trim()) body.allow = list(allow.value);
        if (prompt.value.trim()) body.promptTemplate = prompt.value;
        try {
          const headers = operator.value ? { "x-peergate-operator-token": operator.value } : {};
          const made = await call("POST", "/callers", body, headers);
          operator.value = "";
          out.replaceChildren(
            credentialPanel(made.credential, made.caller.kind, made.caller.name),
            h(
              "p",
              {},
              h(
                "a",
                { href: `#/callers/${encodeURIComponent(made.caller.name)}` },
                `Open ${made.caller.name}`,
              ),
            ),
          );
          say(`Created caller ${made.caller.name}.`);
          for (const old of form.querySelectorAll(".field-error, .notice.error")) old.remove();
        } catch (error) {
          showProblem(form, error);
        }
      },
    },
    h("h2", { id: "create-h" }, "Add a caller"),
    field("Name", name),
    field("Kind", kind),
    field("Tier", tier),
    field("Allow list", allow),
    field("Approval policy", policy),
    field("Prompt template", prompt),
    field("Operator token (needed when the new caller widens past the floor)", operator),
    h("p", {}, h("button", { type: "submit" }, "Create")),
    out,
  );
  return form;
}

/** "a, b c" → ["a", "b", "c"]; one entry a line for lists whose entries hold spaces. */
const lines = (text) =>
  String(text ?? "")
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
const numberOrNull = (input) => (input.value.trim() === "" ? null : Number(input.value));
/** JSON with object keys sorted, so two equal settings compare equal whatever their key order. */
const canonical = (v) =>
  JSON.stringify(v ?? null, (_, x) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x,
  );
const same = (a, b) => canonical(a) === canonical(b);

/**
 * Every setting of a caller the admin API lets an admin change, in one form. Only the settings
 * changed are sent, with the version read (compare-and-set); the server decides whether the change
 * widens and so needs the operator token, and its refusal is shown field by field.
 */
function settingsForm(caller, opHeaders, done) {
  const name = caller.name;
  const b = caller.budgets ?? {};
  const daily = b.daily ?? {};
  const num = (fieldName, value, attrs = {}) =>
    h("input", {
      name: fieldName,
      type: "number",
      min: 0,
      step: "any",
      value: value ?? "",
      placeholder: "no limit",
      ...attrs,
    });
  const select = (fieldName, values, current) =>
    h(
      "select",
      { name: fieldName },
      values.map(([value, label]) => h("option", { value, selected: value === current }, label)),
    );
  const tier = select(
    "tier",
    ["public", "internal", "private"].map((t) => [t, t]),
    caller.tier,
  );
  const allow = h("input", { name: "allow", value: caller.allow.join(", ") });
  const policy = select(
    "approvalPolicy",
    ["auto", "read-only", "low-risk"].map((t) => [t, t]),
    caller.approvalPolicy,
  );
  const whenNobody = select(
    "whenNobody",
    [
      ["", "the kind's default"],
      ["park", "park (wait for an operator)"],
      ["decline", "decline"],
    ],
    caller.whenNobody,
  );
  const classifier = select(
    "classifier",
    [
      ["on", "on"],
      ["off", "off"],
    ],
    caller.classifier,
  );
  const budgetInputs = {
    tokens: num("budgets.tokens", b.tokens),
    costUsd: num("budgets.costUsd", b.costUsd),
    durationMs: num("budgets.durationMs", b.durationMs),
    steps: num("budgets.steps", b.steps),
    concurrentRuns: num("budgets.concurrentRuns", b.concurrentRuns),
  };
  const dailyInputs = {
    tokens: num("budgets.daily.tokens", daily.tokens),
    costUsd: num("budgets.daily.costUsd", daily.costUsd),
    runs: num("budgets.daily.runs", daily.runs),
  };
  const webhook = caller.kind !== "peer";
  const prompt = webhook
    ? h("textarea", { name: "promptTemplate", rows: 4 }, caller.promptTemplate ?? "")
    : null;
  const events =
    caller.kind === "github"
      ? h("input", {
          name: "eventFilter",
          value: (caller.eventFilter ?? []).join(", "),
          placeholder: "every event",
        })
      : null;
  const commands = h("textarea", { name: "commands", rows: 3 }, caller.commands.join("\n"));
  const overrides = h(
    "textarea",
    { name: "toolOverrides", rows: 3, placeholder: "tool = allow | deny | prompt, one a line" },
    Object.entries(caller.toolOverrides)
      .map(([tool, v]) => `${tool} = ${v}`)
      .join("\n"),
  );
  const grants = caller.urlGrants ?? {};
  const urlInputs = {
    hosts: h("input", { name: "urlGrants.hosts", value: (grants.hosts ?? []).join(", ") }),
    suffixes: h("input", { name: "urlGrants.suffixes", value: (grants.suffixes ?? []).join(", ") }),
    prefixes: h(
      "textarea",
      { name: "urlGrants.prefixes", rows: 2 },
      (grants.prefixes ?? []).join("\n"),
    ),
  };
  const jwt = caller.jwt ?? {};
  const jwtInputs =
    caller.kind === "peer"
      ? {
          issuer: h("input", { name: "jwt.issuer", value: jwt.issuer ?? "" }),
          audience: h("input", { name: "jwt.audience", value: jwt.audience ?? "" }),
          algorithms: h("input", {
            name: "jwt.algorithms",
            value: (jwt.algorithms ?? []).join(", "),
            placeholder: "EdDSA, ES256, RS256 …",
          }),
          maxAgeSeconds: num("jwt.maxAgeSeconds", jwt.maxAgeSeconds),
          jwksUrl: h("input", { name: "jwt.jwksUrl", value: jwt.jwksUrl ?? "" }),
          pem: h("textarea", { name: "jwt.pem", rows: 3 }, jwt.pem ?? ""),
          jwk: h("textarea", { name: "jwt.jwk", rows: 3 }, jwt.jwk ? JSON.stringify(jwt.jwk) : ""),
        }
      : null;

  /** The settings as the form says them, in the API's words. */
  const read = () => {
    const out = {
      tier: tier.value,
      allow: list(allow.value),
      approvalPolicy: policy.value,
      whenNobody: whenNobody.value || null,
      classifier: classifier.value,
      commands: lines(commands.value),
      toolOverrides: Object.fromEntries(
        lines(overrides.value).map((l) => {
          const at = l.indexOf("=");
          return at < 0 ? [l, ""] : [l.slice(0, at).trim(), l.slice(at + 1).trim()];
        }),
      ),
    };
    const budgets = {};
    for (const [k, input] of Object.entries(budgetInputs)) {
      const v = numberOrNull(input);
      if (v !== null) budgets[k] = v;
    }
    const d = {};
    for (const [k, input] of Object.entries(dailyInputs)) {
      const v = numberOrNull(input);
      if (v !== null) d[k] = v;
    }
    if (Object.keys(d).length) budgets.daily = d;
    out.budgets = budgets;
    if (prompt) out.promptTemplate = prompt.value;
    if (events) out.eventFilter = events.value.trim() ? list(events.value) : null;
    const g = {
      hosts: list(urlInputs.hosts.value),
      suffixes: list(urlInputs.suffixes.value),
      prefixes: lines(urlInputs.prefixes.value),
    };
    out.urlGrants =
      g.hosts.length || g.suffixes.length || g.prefixes.length
        ? Object.fromEntries(Object.entries(g).filter(([, v]) => v.length))
        : null;
    if (jwtInputs) {
      const j = jwtInputs;
      if (!j.issuer.value.trim() && !j.audience.value.trim()) out.jwt = null;
      else {
        const settings = {
          issuer: j.issuer.value.trim(),
          audience: j.audience.value.trim(),
          algorithms: list(j.algorithms.value),
        };
        if (j.maxAgeSeconds.value.trim()) settings.maxAgeSeconds = Number(j.maxAgeSeconds.value);
        if (j.jwksUrl.value.trim()) settings.jwksUrl = j.jwksUrl.value.trim();
        if (j.pem.value.trim()) settings.pem = j.pem.value.trim();
        if (j.jwk.value.trim()) {
          try {
            settings.jwk = JSON.parse(j.jwk.value);
          } catch {
            settings.jwk = j.jwk.value;
          }
        }
        out.jwt = settings;
      }
    }
    return out;
  };
  /** What the caller holds now, in the same words, to send only what changed. */
  const stored = {
    tier: caller.tier,
    allow: caller.allow,
    approvalPolicy: caller.approvalPolicy,
    whenNobody: caller.whenNobody,
    classifier: caller.classifier,
    commands: caller.commands,
    toolOverrides: caller.toolOverrides,
    budgets: caller.budgets ?? {},
    promptTemplate: caller.promptTemplate ?? "",
    eventFilter: caller.eventFilter ?? null,
    urlGrants: caller.urlGrants
      ? Object.fromEntries(Object.entries(caller.urlGrants).filter(([, v]) => v?.length))
      : null,
    jwt: caller.jwt ?? null,
  };

  const form = h(
    "form",
    { id: "settings" },
    h("h3", {}, "Settings"),
    h(
      "p",
      {},
      "Only what you change is sent. A change that widens what the caller may do needs the operator token above; the server decides, and says which field widens.",
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, "Tools and approval"),
      field("Tier", tier),
      field("Allow list", allow),
      field("Approval policy", policy),
      field("When nobody is there", whenNobody),
      field("Command risk classifier", classifier),
      field("Command allowlist (one a line, e.g. git status)", commands),
      field("Tool overrides", overrides),
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, "Budgets (empty: no limit)"),
      h(
        "div",
        { class: "grid" },
        field("Tokens per run", budgetInputs.tokens),
        field("US dollars per run", budgetInputs.costUsd),
        field("Milliseconds per run", budgetInputs.durationMs),
        field("Steps per run", budgetInputs.steps),
        field("Runs at once", budgetInputs.concurrentRuns),
        field("Tokens per day", dailyInputs.tokens),
        field("US dollars per day", dailyInputs.costUsd),
        field("Runs per day", dailyInputs.runs),
      ),
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, "web_fetch URL grants"),
      field("Hosts", urlInputs.hosts),
      field("Host suffixes (.example.com)", urlInputs.suffixes),
      field("URL prefixes (one a line)", urlInputs.prefixes),
    ),
    prompt || events
      ? h(
          "fieldset",
          {},
          h("legend", {}, "Webhook"),
          prompt ? field("Prompt template ({{payload}} is the request body)", prompt) : null,
          events ? field("Events (empty: every event)", events) : null,
        )
      : null,
    jwtInputs
      ? h(
          "fieldset",
          {},
          h("legend", {}, "JWT trust (empty issuer and audience: none)"),
          field("Issuer", jwtInputs.issuer),
          field("Audience", jwtInputs.audience),
          field("Algorithms", jwtInputs.algorithms),
          field("Max token age (seconds)", jwtInputs.maxAgeSeconds),
          field("JWKS URL", jwtInputs.jwksUrl),
          field("Public key (PEM)", jwtInputs.pem),
          field("Public key (JWK, JSON)", jwtInputs.jwk),
        )
      : null,
    h("p", {}, h("button", { type: "submit" }, "Save settings")),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const now = read();
    const change = {};
    for (const [k, v] of Object.entries(now)) if (!same(v, stored[k])) change[k] = v;
    if (!Object.keys(change).length) {
      say("Nothing changed.");
      return;
    }
    try {
      const result = await call(
        "PATCH",
        `/callers/${encodeURIComponent(name)}`,
        { ...change, expectedVersion: caller.version },
        opHeaders(),
      );
      say(`Saved ${name}: ${result.changed.join(", ") || "nothing"} changed.`);
      await done();
    } catch (error) {
      showProblem(form, error);
    }
  });
  return form;
}

/** The caller's push grants: where its A2A push notifications may be sent. */
function pushHostsForm(name, hosts, opHeaders, done) {
  const input = h("textarea", { name: "hosts", rows: 3 }, hosts.join("\n"));
  const form = h(
    "form",
    { id: "push-hosts" },
    h("h3", {}, "Push hosts"),
    h(
      "p",
      {},
      "Where this caller may have push notifications sent, one a line. Adding one widens: it needs the operator token.",
    ),
    field("Push hosts", input),
    h("p", {}, h("button", { type: "submit" }, "Save push hosts")),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await call(
        "PUT",
        `/callers/${encodeURIComponent(name)}/push-hosts`,
        { hosts: lines(input.value) },
        opHeaders(),
      );
      say(`Saved the push hosts of ${name}.`);
      await done();
    } catch (error) {
      showProblem(form, error);
    }
  });
  return form;
}

async function callerPage(name) {
  const [{ caller }, ceiling, push] = await Promise.all([
    call("GET", `/callers/${encodeURIComponent(name)}`),
    call("GET", `/callers/${encodeURIComponent(name)}/ceiling`),
    call("GET", `/callers/${encodeURIComponent(name)}/push-hosts`).catch(() => ({ hosts: [] })),
  ]);
  const out = h("div", { id: "caller-result" });
  const operator = h("input", { name: "operatorToken", type: "password", autocomplete: "off" });
  const opHeaders = () => (operator.value ? { "x-peergate-operator-token": operator.value } : {});
  const reload = async () => {
    operator.value = "";
    await callerPage(name);
  };
  const act = (form, work) => async (e) => {
    e.preventDefault();
    try {
      await work();
      operator.value = "";
    } catch (error) {
      showProblem(form, error);
    }
  };

  // Revoking asks first, on the page: the caller's credentials stop at once and its runs end.
  const reason = h("input", { name: "reason" });
  const confirmBox = h("div", { id: "revoke-confirm" });
  const revoke = h(
    "form",
    {},
    h("h3", {}, "Revoke"),
    field("Reason", reason),
    h("p", {}, h("button", { type: "submit", class: "danger" }, "Revoke…")),
    confirmBox,
  );
  revoke.addEventListener("submit", (e) => {
    e.preventDefault();
    const yes = h("button", { type: "button", class: "danger" }, `Yes, revoke ${name}`);
    const no = h("button", { type: "button" }, "Keep it");
    yes.addEventListener(
      "click",
      act(revoke, async () => {
        await call(
          "POST",
          `/callers/${encodeURIComponent(name)}/revoke`,
          reason.value ? { reason: reason.value } : {},
        );
        say(`Revoked ${name}.`);
        await callerPage(name);
      }),
    );
    no.addEventListener("click", () => {
      confirmBox.replaceChildren();
      say("Not revoked.");
    });
    confirmBox.replaceChildren(
      h(
        "div",
        { class: "notice", role: "alertdialog", "aria-labelledby": "revoke-q" },
        h(
          "p",
          { id: "revoke-q" },
          `Revoke ${name}? Its credentials stop working now, its allow list is emptied and every run of it ends. Restoring it later needs the operator token and issues a new credential.`,
        ),
        h("p", { class: "row" }, yes, no),
      ),
    );
    yes.focus();
  });

  const restoreTier = h(
    "select",
    { name: "tier" },
    ["public", "internal", "private"].map((k) => h("option", {}, k)),
  );
  const restore = h(
    "form",
    {},
    h("h3", {}, "Restore (needs the operator token)"),
    field("Tier", restoreTier),
    h("p", {}, h("button", { type: "submit" }, "Restore")),
  );
  restore.addEventListener(
    "submit",
    act(restore, async () => {
      const made = await call(
        "POST",
        `/callers/${encodeURIComponent(name)}/restore`,
        { tier: restoreTier.value },
        opHeaders(),
      );
      await callerPage(name);
      document
        .getElementById("caller-result")
        .replaceChildren(credentialPanel(made.credential, caller.kind, name));
    }),
  );

  const grace = h("input", { name: "graceSeconds", type: "number", min: 0, value: 0 });
  const rotate = h(
    "form",
    {},
    h("h3", {}, "Rotate the credential"),
    field("Old credentials work for (seconds)", grace),
    h("p", {}, h("button", { type: "submit" }, "Rotate")),
  );
  rotate.addEventListener(
    "submit",
    act(rotate, async () => {
      const made = await call(
        "POST",
        `/callers/${encodeURIComponent(name)}/rotate`,
        { graceSeconds: Number(grace.value) },
        opHeaders(),
      );
      out.replaceChildren(credentialPanel(made.credential, caller.kind, name));
    }),
  );

  show(
    h("h2", {}, `Caller ${caller.name}`),
    h(
      "p",
      {},
      `${caller.kind} · tier ${caller.tier} · ${caller.revoked ? "revoked" : "active"} · approval ${caller.approvalPolicy} · version ${caller.version}`,
    ),
    h("p", {}, h("a", { href: `#/runs?caller=${encodeURIComponent(caller.name)}` }, "Its runs")),
    out,
    h("h3", {}, "Ceiling"),
    ceilingTable(ceiling, "ceiling"),
    whatIf(caller),
    h(
      "fieldset",
      {},
      h("legend", {}, "Operator token for writes that widen (asked each time, not kept)"),
      field("Operator token", operator),
    ),
    ...(caller.revoked
      ? [restore]
      : [
          settingsForm(caller, opHeaders, reload),
          pushHostsForm(name, push.hosts, opHeaders, reload),
          revoke,
        ]),
    rotate,
    h("details", {}, h("summary", {}, "Everything about this caller"), json(caller)),
  );
}

function ceilingTable(report, id) {
  const rows = report.decisions.map((d) =>
    h(
      "tr",
      {},
      h("td", {}, d.tool),
      h("td", {}, d.admitted ? "admitted" : "not admitted"),
      h("td", {}, d.sentence),
    ),
  );
  return h(
    "div",
    { id },
    h("p", {}, `Admitted: ${report.admitted.length ? report.admitted.join(", ") : "nothing"}`),
    table(["Tool", "Admitted", "Why"], rows),
    report.unknownAllowEntries.length
      ? h(
          "p",
          {},
          `Unknown allow entries: ${report.unknownAllowEntries.map((u) => `${u.entry} (${u.note})`).join("; ")}`,
        )
      : null,
  );
}

function whatIf(caller) {
  const tier = h(
    "select",
    { name: "tier" },
    ["none", "public", "internal", "private"].map((k) =>
      h("option", { selected: k === caller.tier }, k),
    ),
  );
  const allow = h("input", { name: "allow", value: caller.allow.join(", ") });
  const out = h("div", {});
  const form = h(
    "form",
    {
      onsubmit: async (e) => {
        e.preventDefault();
        try {
          out.replaceChildren(
            h("h4", {}, "What-if result"),
            ceilingTable(
              await call("POST", "/ceiling/preview", {
                tier: tier.value,
                allow: list(allow.value),
              }),
              "what-if",
            ),
          );
        } catch (error) {
          showProblem(form, error);
        }
      },
    },
    h("h3", {}, "What if"),
    h(
      "div",
      { class: "row" },
      field("Tier", tier),
      field("Allow list", allow),
      h("button", { type: "submit" }, "Show"),
    ),
    out,
  );
  return form;
}

// ------------------------------------------------------------------ runs and approvals

const runsPerPage = 25;

async function runsPage(params) {
  const caller = h("input", { name: "caller", value: params.get("caller") ?? "" });
  const statusSel = h(
    "select",
    { name: "status" },
    [
      "",
      "submitted",
      "working",
      "parked",
      "input-required",
      "completed",
      "failed",
      "rejected",
      "canceled",
      "expired",
      "interrupted",
      "revoked",
    ].map((s) =>
      h("option", { value: s, selected: s === (params.get("status") ?? "") }, s || "any"),
    ),
  );
  const filter = () => {
    const q = new URLSearchParams();
    if (caller.value) q.set("caller", caller.value);
    if (statusSel.value) q.set("status", statusSel.value);
    return q;
  };
  const form = h(
    "form",
    {
      onsubmit: (e) => {
        e.preventDefault();
        location.hash = `#/runs?${filter()}`;
      },
    },
    h(
      "div",
      { class: "row" },
      field("Caller", caller),
      field("Status", statusSel),
      h("button", { type: "submit" }, "Filter"),
    ),
  );
  // One more than a page is asked for, to know whether an older page exists.
  const q = new URLSearchParams();
  for (const key of ["caller", "status", "before", "beforeId"])
    if (params.get(key)) q.set(key, params.get(key));
  q.set("limit", String(runsPerPage + 1));
  let runs = [];
  try {
    ({ runs } = await call("GET", `/runs?${q}`));
  } catch (error) {
    showProblem(form, error);
  }
  const more = runs.length > runsPerPage;
  runs = runs.slice(0, runsPerPage);
  const rows = runs.map((r) =>
    h(
      "tr",
      {},
      h("td", {}, h("a", { href: `#/runs/${r.id}` }, r.id.slice(0, 8))),
      h("td", {}, r.callerName),
      h("td", {}, r.status),
      h("td", {}, r.pendingApproval?.calledTool ?? r.pendingApproval?.tool ?? ""),
      h("td", {}, String(r.budgetUsed?.tokens ?? 0)),
      h("td", {}, when(r.createdAt)),
    ),
  );
  const older = new URLSearchParams(filter());
  if (runs.length) {
    older.set("before", runs[runs.length - 1].createdAt);
    older.set("beforeId", runs[runs.length - 1].id);
  }
  show(
    h("h2", {}, "Runs"),
    form,
    params.get("before") ? h("p", {}, "Runs created before ", when(params.get("before"))) : null,
    table(["Run", "Caller", "Status", "Waiting on", "Tokens", "Created"], rows),
    pager("Pages of runs", [
      params.get("before") && ["← Newest runs", `#/runs?${filter()}`],
      more && ["Older runs →", `#/runs?${older}`],
    ]),
  );
}

/** The conversation's text parts of one message, joined. */
const messageText = (m) =>
  typeof m?.content === "string"
    ? m.content
    : (Array.isArray(m?.content) ? m.content : [])
        .filter((p) => p?.type === "text" && typeof p.text === "string")
        .map((p) => p.text)
        .join("\n");

/** What the caller asked: the first user message, and the latest if it asked again since. */
function requestOf(run) {
  const asked = (run.messages ?? []).filter((m) => m?.role === "user").map(messageText);
  const first = asked[0];
  const last = asked.at(-1);
  return h(
    "div",
    { class: "request" },
    h("h4", {}, `What ${run.callerName} asked`),
    h("pre", { class: "request-text" }, first ?? "—"),
    asked.length > 1 && last !== first
      ? [h("h4", {}, "Its latest message"), h("pre", {}, last)]
      : null,
  );
}

/** The tool calls and results in a run's conversation, by call id. */
function conversationParts(messages) {
  const parts = new Map();
  for (const m of messages ?? []) {
    if (!Array.isArray(m?.content)) continue;
    for (const part of m.content) {
      if (!part?.toolCallId) continue;
      const entry = parts.get(part.toolCallId) ?? {};
      if (part.type === "tool-call") entry.input = part.input ?? part.args;
      if (part.type === "tool-result") entry.output = part.output ?? part.result;
      parts.set(part.toolCallId, entry);
    }
  }
  return parts;
}

async function runPage(id) {
  const { run } = await call("GET", `/runs/${encodeURIComponent(id)}`);
  const parts = conversationParts(run.messages);
  const calls = run.toolCalls.map((t) => {
    const p = parts.get(t.callId) ?? {};
    return h(
      "details",
      { class: "tool-call" },
      h("summary", {}, `${t.tool} — ${t.status}${t.code ? ` (${t.code})` : ""}`),
      h("p", {}, `call ${t.callId} · digest ${t.argsDigest.slice(0, 12)}…`),
      h("h4", {}, "Arguments"),
      json(p.input ?? null),
      h("h4", {}, "Output"),
      json(p.output ?? null),
    );
  });
  show(
    h("h2", {}, `Run ${run.id}`),
    h(
      "p",
      { id: "run-status" },
      `Status: ${run.status} · caller ${run.callerName} · ${run.origin}`,
    ),
    run.error ? h("p", { class: "notice error" }, `${run.error.code}: ${run.error.message}`) : null,
    run.pending ? approvalPanel(run, () => runPage(run.id)) : requestOf(run),
    h("h3", {}, "Tool calls"),
    ...(calls.length ? calls : [h("p", {}, "None.")]),
    h("h3", {}, "Answer"),
    h("pre", { id: "run-answer" }, run.text ?? "—"),
  );
}

/**
 * A parked run's question to the operator: what the caller asked beside the call that waits (its
 * arguments, why it asks, the diff it would make), then Approve (with the operator token, asked
 * each time) and Reject (with a reason the run reads). `after` redraws the page once answered.
 */
function approvalPanel(run, after) {
  const p = run.pending;
  const operator = h("input", {
    name: "operatorToken",
    type: "password",
    autocomplete: "off",
    required: true,
  });
  const reason = h("input", { name: "reason" });
  const approve = h(
    "form",
    {},
    field("Operator token (asked each time)", operator),
    h("p", {}, h("button", { type: "submit" }, "Approve")),
  );
  const reject = h(
    "form",
    {},
    field("Reason", reason),
    h("p", {}, h("button", { type: "submit", class: "danger" }, "Reject")),
  );
  const answered = (form, error) => {
    if (error.status === 409 || error.status === 404) {
      error.message = `This page is stale: the run was already answered or moved on (${error.message}). Reload to see it.`;
    }
    showProblem(form, error);
  };
  approve.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await call(
        "POST",
        `/runs/${run.id}/approve`,
        { callId: p.callId, argsDigest: p.argsDigest },
        { "x-peergate-operator-token": operator.value },
      );
      operator.value = "";
      say("Approved; the run resumes.");
      await after();
    } catch (error) {
      operator.value = "";
      answered(approve, error);
    }
  });
  reject.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await call("POST", `/runs/${run.id}/reject`, {
        callId: p.callId,
        ...(reason.value ? { reason: reason.value } : {}),
      });
      say("Rejected; the run reads the reason.");
      await after();
    } catch (error) {
      answered(reject, error);
    }
  });
  const age = (Date.now() - new Date(p.requestedAt).getTime()) / 1000;
  const headingId = `pending-h-${run.id}`;
  return h(
    "section",
    { class: "notice approval", "aria-labelledby": headingId, "data-run": run.id },
    h("h3", { id: headingId }, `Waiting for approval: ${p.calledTool ?? p.tool}`),
    h(
      "p",
      {},
      `Run `,
      h("a", { href: `#/runs/${run.id}` }, run.id.slice(0, 8)),
      ` of ${run.callerName} · asked `,
      when(p.requestedAt),
      ` (${ago(age)} ago)`,
      run.parkedUntil ? [" · expires ", when(run.parkedUntil)] : null,
    ),
    h(
      "div",
      { class: "side-by-side" },
      requestOf(run),
      h(
        "div",
        { class: "pending-call" },
        h("h4", {}, "The call that waits"),
        p.summary ? h("p", {}, p.summary) : null,
        p.risk ? h("p", {}, `Risk: ${p.risk}`) : null,
        p.reason ? h("p", {}, `Why it asks: ${p.reason}`) : null,
        h("h4", {}, "Arguments"),
        json(p.args),
        p.previewDiff
          ? [h("h4", {}, "Diff"), diffView(p.previewDiff)]
          : h("p", {}, "No diff: this call changes no file."),
      ),
    ),
    h("div", { class: "row answers" }, approve, reject),
  );
}

/** A unified diff, line by line, each line marked by its first character (as text, never markup). */
function diffView(text) {
  return h(
    "pre",
    { class: "diff" },
    String(text)
      .split("\n")
      .map((line) =>
        h(
          "span",
          {
            class:
              line.startsWith("+") && !line.startsWith("+++")
                ? "add"
                : line.startsWith("-") && !line.startsWith("---")
                  ? "del"
                  : line.startsWith("@@")
                    ? "hunk"
                    : undefined,
          },
          `${line}\n`,
        ),
      ),
  );
}

const approvalsPerPage = 10;

async function approvalsPage(params) {
  const q = new URLSearchParams({ status: "parked", limit: String(approvalsPerPage + 1) });
  if (params.get("before")) q.set("before", params.get("before"));
  let { runs } = await call("GET", `/runs?${q}`);
  const more = runs.length > approvalsPerPage;
  runs = runs.slice(0, approvalsPerPage);
  // Each run in full: its request, arguments and diff (a page holds at most ten).
  const details = await Promise.all(
    runs.map((r) =>
      call("GET", `/runs/${r.id}`)
        .then((d) => d.run)
        .catch(() => null),
    ),
  );
  const panels = details
    .filter((run) => run?.pending)
    .map((run) => approvalPanel(run, () => approvalsPage(params)));
  const older = new URLSearchParams();
  if (runs.length) {
    older.set("before", runs[runs.length - 1].createdAt);
    older.set("beforeId", runs[runs.length - 1].id);
  }
  show(
    h("h2", {}, "Parked approvals"),
    panels.length ? panels : h("p", { id: "no-approvals" }, "Nothing waits for an answer."),
    pager("Pages of approvals", [
      params.get("before") && ["← Newest approvals", "#/approvals"],
      more && ["Older approvals →", `#/approvals?${older}`],
    ]),
  );
}

// ------------------------------------------------------------------ audit

async function auditPage(params) {
  const kind = h("input", { name: "kind", value: params.get("kind") ?? "" });
  const subject = h("input", {
    name: "subject",
    value: params.get("subject") ?? "",
    placeholder: "caller name or id",
  });
  const since = h("input", {
    name: "since",
    type: "datetime-local",
    value: params.get("since") ?? "",
  });
  const form = h(
    "form",
    {
      onsubmit: (e) => {
        e.preventDefault();
        const q = new URLSearchParams();
        if (kind.value) q.set("kind", kind.value);
        if (subject.value) q.set("subject", subject.value);
        if (since.value) q.set("since", since.value);
        location.hash = `#/audit?${q}`;
      },
    },
    h(
      "div",
      { class: "row" },
      field("Kind", kind),
      field("Subject", subject),
      field("Since", since),
      h("button", { type: "submit" }, "Filter"),
    ),
  );
  const [verify, { callers }] = await Promise.all([
    call("GET", "/audit/verify"),
    call("GET", "/callers"),
  ]);
  // Subjects name callers as caller:<id>; the page shows and accepts names.
  const names = new Map(callers.map((c) => [`caller:${c.id}`, `caller:${c.name}`]));
  const ids = new Map(
    callers.flatMap((c) => [
      [c.name, `caller:${c.id}`],
      [`caller:${c.name}`, `caller:${c.id}`],
    ]),
  );
  // Pages of the trail in chain order. Without a filter the first page shown is the newest; with
  // one, the trail is read from its start (the API pages forward from a sequence number).
  const perPage = 100;
  const filtered = Boolean(params.get("kind") || params.get("subject"));
  const chained = verify.ok ? verify.count : 0;
  const after = params.has("after")
    ? Math.max(0, Number(params.get("after")) || 0)
    : filtered
      ? 0
      : Math.max(0, chained - perPage);
  // An older page ends where the page before it started: its limit may be less than a page.
  const limit = Math.min(perPage, Math.max(1, Number(params.get("limit")) || perPage));
  const q = new URLSearchParams({ limit: String(limit), after: String(after) });
  if (params.get("kind")) q.set("kind", params.get("kind"));
  const wanted = params.get("subject");
  if (wanted) q.set("subject", ids.get(wanted) ?? wanted);
  let events = [];
  let next = null;
  try {
    ({ events, next } = await call("GET", `/audit?${q}`));
  } catch (error) {
    showProblem(form, error);
  }
  const sinceMs = params.get("since") ? new Date(params.get("since")).getTime() : 0;
  const rows = events
    .filter((ev) => new Date(ev.createdAt).getTime() >= sinceMs)
    .reverse()
    .map((ev) =>
      h(
        "tr",
        {},
        h("td", {}, ev.seq ?? "not chained yet"),
        h("td", {}, when(ev.createdAt)),
        h("td", {}, ev.actor),
        h("td", {}, ev.kind),
        h("td", {}, ev.subject ? (names.get(ev.subject) ?? ev.subject) : ""),
        h("td", {}, h("details", {}, h("summary", {}, "data"), json(ev.data))),
      ),
    );
  const pageLink = (to, size = perPage) => {
    const p = new URLSearchParams(params);
    p.set("after", String(to));
    if (size === perPage) p.delete("limit");
    else p.set("limit", String(size));
    return `#/audit?${p}`;
  };
  const verdict = verify.ok
    ? `Chain verified: ${verify.count} events, intact.${verify.unchained?.count ? ` ${verify.unchained.count} newer events are not chained yet.` : ""}`
    : `Chain BROKEN at event ${verify.seq}: ${verify.problem}`;
  show(
    h("h2", {}, "Audit trail"),
    h("p", { class: "notice", id: "audit-verify" }, verdict),
    form,
    h("p", {}, `Newest first: events after #${after}${next ? ` up to #${next}` : ""}.`),
    table(["#", "When", "Actor", "Kind", "Subject", "Data"], rows),
    pager("Pages of the audit trail", [
      next !== null && ["← Newer events", pageLink(next)],
      !filtered &&
        after > 0 && [
          "Older events →",
          pageLink(Math.max(0, after - perPage), Math.min(perPage, after)),
        ],
      filtered && after > 0 && ["From the start", pageLink(0)],
    ]),
  );
}

// ------------------------------------------------------------------ live updates and routing

let live;
async function listen() {
  live?.abort();
  live = new AbortController();
  try {
    const res = await fetch(`${api}/events`, {
      headers: { authorization: `Bearer ${token()}` },
      signal: live.signal,
    });
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end = buffer.indexOf("\n\n");
      while (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event && data) onEvent(event, JSON.parse(data));
        end = buffer.indexOf("\n\n");
      }
    }
  } catch {
    // Aborted on sign-out, or the server went away: the next navigation listens again.
  }
}

let refreshing = false;
function onEvent(event, data) {
  if (event === "approval")
    say(`Run ${data.runId.slice(0, 8)} of ${data.callerName} waits for approval (${data.tool}).`);
  if (event === "answered") say(`Run ${data.runId.slice(0, 8)} moved on: ${data.status}.`);
  if (event !== "run" && event !== "approval" && event !== "answered") return;
  const [page, id] = location.hash.replace(/^#\//, "").split(/[/?]/);
  const shown = page === "runs" && id ? id : undefined;
  const relevant =
    page === "approvals" ||
    page === "overview" ||
    page === "" ||
    (page === "runs" && (!shown || shown === (data.id ?? data.runId)));
  if (!relevant || refreshing) return;
  // A form being filled in or sent is not replaced under the operator's hands: a focused field,
  // or a focused button of a form (the one just clicked; its answer, an error included, is shown
  // in that form, which a redraw would throw away).
  const focused = document.activeElement;
  if (
    focused &&
    (["INPUT", "TEXTAREA", "SELECT"].includes(focused.tagName) || focused.closest("form"))
  )
    return;
  refreshing = true;
  route().finally(() => {
    refreshing = false;
  });
}

async function route() {
  if (!token()) return signIn();
  nav.hidden = false;
  if (!live) listen();
  const hash = location.hash.replace(/^#\/?/, "");
  const [pathPart, queryPart] = hash.split("?");
  const params = new URLSearchParams(queryPart ?? "");
  const [page, id] = (pathPart ?? "").split("/").map(decodeURIComponent);
  try {
    if (page === "callers" && id) await callerPage(id);
    else if (page === "runs" && id) await runPage(id);
    else if (page === "runs") await runsPage(params);
    else if (page === "approvals") await approvalsPage(params);
    else if (page === "audit") await auditPage(params);
    else if (page === "callers") await callersPage(params);
    else await overviewPage(params);
  } catch (error) {
    if (error.status !== 401)
      show(h("div", { class: "notice error", role: "alert" }, error.message));
  }
}

document.getElementById("sign-out").addEventListener("click", () => {
  sessionStorage.removeItem(tokenKey);
  live?.abort();
  live = undefined;
  signIn();
});
window.addEventListener("hashchange", () => {
  route().then(() => main.focus());
});
route();
