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
    const top = String(p.field ?? "").split(".")[0];
    const input = form.querySelector(`[name="${CSS.escape(top)}"]`);
    if (input) {
      const id = `err-${top}`;
      const msg = h("span", { class: "field-error", id }, p.message);
      input.setAttribute("aria-invalid", "true");
      input.setAttribute("aria-describedby", id);
      input.after(msg);
    } else general.push(p.message);
  }
  const summary = [error.message, ...general].join(" — ");
  form.prepend(h("div", { class: "notice error", role: "alert" }, summary));
}

const when = (iso) => (iso ? new Date(iso).toLocaleString() : "—");
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

async function callersPage() {
  const { callers } = await call("GET", "/callers");
  const lastUse = await lastUses();
  const rows = callers.map((c) =>
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
    table(["Name", "Kind", "Tier", "Approval policy", "State", "Last use"], rows),
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

async function callerPage(name) {
  const [{ caller }, ceiling] = await Promise.all([
    call("GET", `/callers/${encodeURIComponent(name)}`),
    call("GET", `/callers/${encodeURIComponent(name)}/ceiling`),
  ]);
  const out = h("div", { id: "caller-result" });
  const operator = h("input", { name: "operatorToken", type: "password", autocomplete: "off" });
  const opHeaders = () => (operator.value ? { "x-peergate-operator-token": operator.value } : {});
  const act = (form, work) => async (e) => {
    e.preventDefault();
    try {
      await work();
      operator.value = "";
    } catch (error) {
      showProblem(form, error);
    }
  };

  const tier = h(
    "select",
    { name: "tier" },
    ["public", "internal", "private"].map((k) => h("option", { selected: k === caller.tier }, k)),
  );
  const allow = h("input", { name: "allow", value: caller.allow.join(", ") });
  const narrow = h(
    "form",
    {},
    h("h3", {}, "Change tier and allow list"),
    field("Tier", tier),
    field("Allow list", allow),
    h("p", {}, h("button", { type: "submit" }, "Save")),
  );
  narrow.addEventListener(
    "submit",
    act(narrow, async () => {
      await call(
        "PATCH",
        `/callers/${encodeURIComponent(name)}`,
        { tier: tier.value, allow: list(allow.value), expectedVersion: caller.version },
        opHeaders(),
      );
      say(`Saved ${name}.`);
      await callerPage(name);
    }),
  );

  const reason = h("input", { name: "reason" });
  const revoke = h(
    "form",
    {},
    h("h3", {}, "Revoke"),
    field("Reason", reason),
    h("p", {}, h("button", { type: "submit", class: "danger" }, "Revoke")),
  );
  revoke.addEventListener(
    "submit",
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
    ...(caller.revoked ? [restore] : [narrow, revoke]),
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
  const form = h(
    "form",
    {
      onsubmit: (e) => {
        e.preventDefault();
        const q = new URLSearchParams();
        if (caller.value) q.set("caller", caller.value);
        if (statusSel.value) q.set("status", statusSel.value);
        location.hash = `#/runs?${q}`;
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
  const q = new URLSearchParams(params);
  q.set("limit", "100");
  let runs = [];
  try {
    ({ runs } = await call("GET", `/runs?${q}`));
  } catch (error) {
    showProblem(form, error);
  }
  const rows = runs.map((r) =>
    h(
      "tr",
      {},
      h("td", {}, h("a", { href: `#/runs/${r.id}` }, r.id.slice(0, 8))),
      h("td", {}, r.callerName),
      h("td", {}, r.status),
      h("td", {}, r.pendingApproval?.calledTool ?? r.pendingApproval?.tool ?? ""),
      h("td", {}, when(r.createdAt)),
    ),
  );
  show(
    h("h2", {}, "Runs"),
    form,
    table(["Run", "Caller", "Status", "Waiting on", "Created"], rows),
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
    run.pending ? approvalPanel(run) : null,
    h("h3", {}, "Tool calls"),
    ...(calls.length ? calls : [h("p", {}, "None.")]),
    h("h3", {}, "Answer"),
    h("pre", { id: "run-answer" }, run.text ?? "—"),
  );
}

function approvalPanel(run) {
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
      await runPage(run.id);
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
      await runPage(run.id);
    } catch (error) {
      answered(reject, error);
    }
  });
  return h(
    "section",
    { class: "notice", "aria-labelledby": "pending-h" },
    h("h3", { id: "pending-h" }, `Waiting for approval: ${p.calledTool ?? p.tool}`),
    p.summary ? h("p", {}, p.summary) : null,
    p.risk ? h("p", {}, `Risk: ${p.risk}`) : null,
    h("h4", {}, "Arguments"),
    json(p.args),
    p.previewDiff ? [h("h4", {}, "Diff"), h("pre", { class: "diff" }, p.previewDiff)] : null,
    approve,
    reject,
  );
}

async function approvalsPage() {
  const { runs } = await call("GET", "/runs?status=parked&limit=500");
  const rows = runs.map((r) =>
    h(
      "tr",
      {},
      h("td", {}, h("a", { href: `#/runs/${r.id}` }, r.id.slice(0, 8))),
      h("td", {}, r.callerName),
      h("td", {}, r.pendingApproval?.calledTool ?? r.pendingApproval?.tool ?? ""),
      h("td", {}, r.pendingApproval?.summary ?? ""),
      h("td", {}, when(r.pendingApproval?.requestedAt)),
    ),
  );
  show(
    h("h2", {}, "Parked approvals"),
    rows.length
      ? table(["Run", "Caller", "Tool", "What", "Asked"], rows)
      : h("p", {}, "Nothing waits for an answer."),
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
  const q = new URLSearchParams({ limit: "1000" });
  if (params.get("kind")) q.set("kind", params.get("kind"));
  const wanted = params.get("subject");
  if (wanted) q.set("subject", ids.get(wanted) ?? wanted);
  let events = [];
  try {
    ({ events } = await call("GET", `/audit?${q}`));
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
  const verdict = verify.ok
    ? `Chain verified: ${verify.count} events, intact.${verify.unchained?.count ? ` ${verify.unchained.count} newer events are not chained yet.` : ""}`
    : `Chain BROKEN at event ${verify.seq}: ${verify.problem}`;
  show(
    h("h2", {}, "Audit trail"),
    h("p", { class: "notice", id: "audit-verify" }, verdict),
    form,
    table(["#", "When", "Actor", "Kind", "Subject", "Data"], rows),
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
    page === "approvals" || (page === "runs" && (!shown || shown === (data.id ?? data.runId)));
  if (!relevant || refreshing) return;
  // A form being filled in is not replaced under the operator's hands.
  if (
    document.activeElement &&
    ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName)
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
    else if (page === "approvals") await approvalsPage();
    else if (page === "audit") await auditPage(params);
    else await callersPage();
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
