// Descriptors the server was started with beyond its standard streams. A descriptor open
// across exec (no close-on-exec flag) passes to every process the server starts, and Node's
// spawn, the sandbox's launcher and bwrap all pass on what they were given: the command inside
// the sandbox would hold it too. A supervisor's pipe, a shell's `100>>file`, a test runner's
// socket would then be written to or read from inside every sandbox, past every bind bwrap
// makes. Node and libuv open every descriptor of their own with close-on-exec, so closing the
// inherited ones once, before anything starts, leaves nothing of the server's beyond the three
// standard streams (replaced at every spawn) for a command to hold.
import { closeSync, readdirSync, readFileSync } from "node:fs";

/** Linux's O_CLOEXEC, as /proc/<pid>/fdinfo shows it in `flags` (octal) for such a descriptor. */
const closeOnExec = 0o2000000;

/**
 * Closes every descriptor above 2 that this process holds open across exec; returns their
 * numbers. Where there is no /proc (not Linux) nothing is closed.
 */
export function closeInheritedDescriptors(): number[] {
  let names: string[];
  try {
    names = readdirSync("/proc/self/fd");
  } catch {
    return [];
  }
  const closed: number[] = [];
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isSafeInteger(fd) || fd <= 2) continue;
    let flags: number;
    try {
      const info = readFileSync(`/proc/self/fdinfo/${fd}`, "utf8");
      flags = Number.parseInt(/^flags:\s+([0-7]+)$/m.exec(info)?.[1] ?? "", 8);
    } catch {
      // The directory listing's own descriptor, closed since.
      continue;
    }
    if (Number.isNaN(flags) || (flags & closeOnExec) !== 0) continue;
    try {
      closeSync(fd);
      closed.push(fd);
    } catch {
      // Closed meanwhile.
    }
  }
  return closed;
}
