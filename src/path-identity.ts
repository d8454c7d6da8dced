// Whether one configured path lies inside another, decided by what the paths are rather than how
// they are spelled: after resolving symlinks (a parent that is a symlink into the workspace), by
// device and inode (the same directory under a second name, a bind mount), and through the mount
// table (a bind mount of one inside the other, which neither path's ancestors show). A path that
// does not exist yet is judged by its deepest existing ancestor, resolved, plus the rest.
import { readFileSync, realpathSync, type Stats, statSync } from "node:fs";
import path from "node:path";

/** The real path of `file`: its deepest existing ancestor resolved, then the missing rest. */
export function canonicalPath(file: string): string {
  const absolute = path.resolve(file);
  const missing: string[] = [];
  for (let probe = absolute; ; probe = path.dirname(probe)) {
    try {
      return path.join(realpathSync(probe), ...missing.reverse());
    } catch {
      if (probe === path.dirname(probe)) return absolute;
      missing.push(path.basename(probe));
    }
  }
}

function isWithin(inner: string, outer: string): boolean {
  const relative = path.relative(outer, inner);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
}

function statOf(file: string): Stats | undefined {
  try {
    return statSync(file);
  } catch {
    return undefined;
  }
}

const sameFile = (a: Stats, b: Stats) => a.dev === b.dev && a.ino === b.ino;

type Mount = { readonly dev: string; readonly root: string; readonly point: string };

/** The mount table (Linux), or nothing where there is none to read. */
function readMounts(): Mount[] {
  let text: string;
  try {
    text = readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return [];
  }
  const decodeOctal = (s: string) =>
    s.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => {
      const fields = line.split(" ");
      return {
        dev: fields[2] ?? "",
        root: decodeOctal(fields[3] ?? ""),
        point: decodeOctal(fields[4] ?? ""),
      };
    });
}

/** The mount holding `real` (the longest mount point above it) and `real`'s path in that file system. */
function locate(mounts: readonly Mount[], real: string): { dev: string; inFs: string } | undefined {
  let best: Mount | undefined;
  for (const m of mounts) {
    if (isWithin(real, m.point) && (best === undefined || m.point.length >= best.point.length)) {
      best = m;
    }
  }
  if (best === undefined) return undefined;
  return { dev: best.dev, inFs: path.join(best.root, path.relative(best.point, real)) };
}

/**
 * True when `inner` is `outer` or lies inside it under any name: by real path, by the identity
 * of one of `inner`'s ancestors (a second name for `outer` above it), or because a mount inside
 * `outer` shows the file system subtree `inner` is in (a bind mount of it into `outer`).
 */
export function liesWithin(inner: string, outer: string): boolean {
  const realInner = canonicalPath(inner);
  const realOuter = canonicalPath(outer);
  if (isWithin(realInner, realOuter)) return true;
  const outerStats = statOf(realOuter);
  if (outerStats !== undefined) {
    for (let dir = realInner; ; dir = path.dirname(dir)) {
      const stats = statOf(dir);
      if (stats !== undefined && sameFile(stats, outerStats)) return true;
      if (dir === path.dirname(dir)) break;
    }
  }
  const mounts = readMounts();
  const at = locate(mounts, realInner);
  if (at === undefined) return false;
  return mounts.some(
    (m) => m.dev === at.dev && isWithin(m.point, realOuter) && isWithin(at.inFs, m.root),
  );
}

/** `liesWithin` either way: one of the two holds the other (or they are the same directory). */
export function overlaps(a: string, b: string): boolean {
  return liesWithin(a, b) || liesWithin(b, a);
}
