// A unified diff (the `diff -u` format) of two texts, for the preview an operator approves.
// Myers' algorithm on lines after trimming the common head and tail; when the two texts differ
// in more places than `maxEdits`, the changed middle is shown as one replacement instead (still
// a correct diff, just not a minimal one), so a pathological pair cannot cost quadratic time.

const defaultContext = 3;
const maxEdits = 2000;

type Op = { readonly kind: " " | "-" | "+"; readonly line: string };

/** Lines with their terminators, so a missing final newline is a difference like any other. */
function splitLines(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

function diffMiddle(a: readonly string[], b: readonly string[]): Op[] | undefined {
  const n = a.length;
  const m = b.length;
  const offset = n + m + 1;
  const v = new Int32Array(2 * offset + 1);
  const trace: Int32Array[] = [];
  for (let d = 0; d <= Math.min(n + m, maxEdits); d++) {
    // Only the diagonals this round can read (k-1 .. k+1 for |k| <= d): O(D²) memory in all.
    trace.push(v.slice(offset - d - 1, offset + d + 2));
    for (let k = -d; k <= d; k += 2) {
      const down = k === -d || (k !== d && (v[offset + k - 1] ?? 0) < (v[offset + k + 1] ?? 0));
      let x = down ? (v[offset + k + 1] ?? 0) : (v[offset + k - 1] ?? 0) + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) return backtrack(a, b, trace, d);
    }
  }
  return undefined;
}

function backtrack(
  a: readonly string[],
  b: readonly string[],
  trace: readonly Int32Array[],
  edits: number,
): Op[] {
  const ops: Op[] = [];
  let x = a.length;
  let y = b.length;
  for (let d = edits; d > 0; d--) {
    const v = trace[d] as Int32Array;
    const at = (diagonal: number) => v[diagonal + d + 1] ?? 0;
    const k = x - y;
    const down = k === -d || (k !== d && at(k - 1) < at(k + 1));
    const prevK = down ? k + 1 : k - 1;
    const prevX = at(prevK);
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      ops.push({ kind: " ", line: a[x - 1] as string });
      x--;
      y--;
    }
    if (down) ops.push({ kind: "+", line: b[y - 1] as string });
    else ops.push({ kind: "-", line: a[x - 1] as string });
    x = prevX;
    y = prevY;
  }
  while (x > 0 && y > 0) {
    ops.push({ kind: " ", line: a[x - 1] as string });
    x--;
    y--;
  }
  return ops.reverse();
}

function diffLines(a: readonly string[], b: readonly string[]): Op[] {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (
    tail < a.length - head &&
    tail < b.length - head &&
    a[a.length - 1 - tail] === b[b.length - 1 - tail]
  ) {
    tail++;
  }
  const midA = a.slice(head, a.length - tail);
  const midB = b.slice(head, b.length - tail);
  const middle = diffMiddle(midA, midB) ?? [
    ...midA.map((line): Op => ({ kind: "-", line })),
    ...midB.map((line): Op => ({ kind: "+", line })),
  ];
  return [
    ...a.slice(0, head).map((line): Op => ({ kind: " ", line })),
    ...middle,
    ...a.slice(a.length - tail).map((line): Op => ({ kind: " ", line })),
  ];
}

function formatLine(op: Op): string {
  return op.line.endsWith("\n")
    ? `${op.kind}${op.line}`
    : `${op.kind}${op.line}\n\\ No newline at end of file\n`;
}

/**
 * The unified diff turning `oldText` into `newText`, with `---`/`+++` headers naming the labels
 * (`/dev/null` for a file that does not exist yet). Empty when the texts are equal.
 */
export function createUnifiedDiff(
  oldText: string,
  newText: string,
  labels: { readonly old: string; readonly new: string },
  context = defaultContext,
): string {
  if (oldText === newText) return "";
  const ops = diffLines(splitLines(oldText), splitLines(newText));
  const out = [`--- ${labels.old}\n`, `+++ ${labels.new}\n`];
  let i = 0;
  // Line numbers of ops[i] in the old and new text.
  let oldLine = 1;
  let newLine = 1;
  while (i < ops.length) {
    // Skip to the next change, counting lines.
    let change = i;
    let oldAt = oldLine;
    let newAt = newLine;
    while (change < ops.length && (ops[change] as Op).kind === " ") {
      change++;
      oldAt++;
      newAt++;
    }
    if (change >= ops.length) break;
    const lead = Math.min(context, change - i);
    const start = change - lead;
    let hunkOld = oldAt - lead;
    let hunkNew = newAt - lead;
    // Extend the hunk while changes are within 2*context of each other.
    let end = change;
    let lastChange = change;
    while (end < ops.length) {
      if ((ops[end] as Op).kind !== " ") lastChange = end;
      else if (end - lastChange > 2 * context) break;
      end++;
    }
    end = Math.min(ops.length, lastChange + 1 + context);
    let oldCount = 0;
    let newCount = 0;
    const body: string[] = [];
    for (let j = start; j < end; j++) {
      const op = ops[j] as Op;
      if (op.kind !== "+") oldCount++;
      if (op.kind !== "-") newCount++;
      body.push(formatLine(op));
    }
    if (oldCount === 0) hunkOld--;
    if (newCount === 0) hunkNew--;
    out.push(`@@ -${hunkOld},${oldCount} +${hunkNew},${newCount} @@\n`, ...body);
    // Advance the counters to `end`.
    for (let j = i; j < end; j++) {
      const op = ops[j] as Op;
      if (op.kind !== "+") oldLine++;
      if (op.kind !== "-") newLine++;
    }
    i = end;
  }
  return out.join("");
}
