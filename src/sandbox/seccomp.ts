// The sandbox's seccomp filter: a classic-BPF program, built here byte by byte (no dependency),
// that bwrap installs on the command just before exec (`--seccomp FD`). It refuses the system
// calls a tool never needs and that reach the kernel's most exposed surfaces or the host itself:
// mounting and namespaces (the ways out of the sandbox's view), tracing other processes, BPF,
// the kernel keyring, modules, kexec, perf events, userfaultfd (the usual tool of kernel race
// exploits), rebooting, swap, accounting, quotas, the kernel log, port I/O, file handles (which
// open a file by inode, past every path the sandbox binds), the clocks, the host name,
// io_uring (a second system-call interface that seccomp does not see into), and the two
// terminal ioctls that push input into a terminal (TIOCSTI, TIOCLINUX). docs/sandbox.md lists
// them with the reason for each.
//
// The filter knows two architectures, x86_64 and aarch64, by their audit arch; a system call of
// any other ABI (i386 through `int 0x80` on x86_64, arm32 on aarch64) kills the process, since
// its numbers are another table the filter does not check, and x32 calls (the 0x40000000 bit on
// x86_64) are refused. A refused call returns EPERM, except clone3, which returns ENOSYS: its
// flags are in a struct the filter cannot read, and ENOSYS makes libc fall back to clone, whose
// flags it can.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

const auditArch = { x86_64: 0xc000003e, aarch64: 0xc00000b7 } as const;
export type SeccompArch = keyof typeof auditArch;

/** The system calls refused with EPERM, by name, with their numbers on each architecture. */
const refused: Readonly<Record<string, { readonly x86_64: number; readonly aarch64?: number }>> = {
  // Mounting and changing root: the sandbox's file system view is made once, by bwrap.
  mount: { x86_64: 165, aarch64: 40 },
  umount2: { x86_64: 166, aarch64: 39 },
  pivot_root: { x86_64: 155, aarch64: 41 },
  chroot: { x86_64: 161, aarch64: 51 },
  fsopen: { x86_64: 430, aarch64: 430 },
  fsconfig: { x86_64: 431, aarch64: 431 },
  fsmount: { x86_64: 432, aarch64: 432 },
  fspick: { x86_64: 433, aarch64: 433 },
  move_mount: { x86_64: 429, aarch64: 429 },
  open_tree: { x86_64: 428, aarch64: 428 },
  open_tree_attr: { x86_64: 467, aarch64: 467 },
  mount_setattr: { x86_64: 442, aarch64: 442 },
  // New namespaces (a user namespace gives back every capability in it).
  unshare: { x86_64: 272, aarch64: 97 },
  setns: { x86_64: 308, aarch64: 268 },
  // Reading or steering another process.
  ptrace: { x86_64: 101, aarch64: 117 },
  process_vm_readv: { x86_64: 310, aarch64: 270 },
  process_vm_writev: { x86_64: 311, aarch64: 271 },
  pidfd_getfd: { x86_64: 438, aarch64: 438 },
  process_madvise: { x86_64: 440, aarch64: 440 },
  kcmp: { x86_64: 312, aarch64: 272 },
  // Kernel surfaces a tool has no use for, and exploits often do.
  bpf: { x86_64: 321, aarch64: 280 },
  perf_event_open: { x86_64: 298, aarch64: 241 },
  userfaultfd: { x86_64: 323, aarch64: 282 },
  io_uring_setup: { x86_64: 425, aarch64: 425 },
  io_uring_enter: { x86_64: 426, aarch64: 426 },
  io_uring_register: { x86_64: 427, aarch64: 427 },
  // The kernel keyring is per host user, shared with the workspace owner's other processes.
  keyctl: { x86_64: 250, aarch64: 219 },
  add_key: { x86_64: 248, aarch64: 217 },
  request_key: { x86_64: 249, aarch64: 218 },
  // The machine itself.
  init_module: { x86_64: 175, aarch64: 105 },
  finit_module: { x86_64: 313, aarch64: 273 },
  delete_module: { x86_64: 176, aarch64: 106 },
  kexec_load: { x86_64: 246, aarch64: 104 },
  kexec_file_load: { x86_64: 320, aarch64: 294 },
  reboot: { x86_64: 169, aarch64: 142 },
  swapon: { x86_64: 167, aarch64: 224 },
  swapoff: { x86_64: 168, aarch64: 225 },
  acct: { x86_64: 163, aarch64: 89 },
  quotactl: { x86_64: 179, aarch64: 60 },
  quotactl_fd: { x86_64: 443, aarch64: 443 },
  syslog: { x86_64: 103, aarch64: 116 },
  iopl: { x86_64: 172 },
  ioperm: { x86_64: 173 },
  vhangup: { x86_64: 153, aarch64: 58 },
  lookup_dcookie: { x86_64: 212, aarch64: 18 },
  settimeofday: { x86_64: 164, aarch64: 170 },
  clock_settime: { x86_64: 227, aarch64: 112 },
  clock_adjtime: { x86_64: 305, aarch64: 266 },
  adjtimex: { x86_64: 159, aarch64: 171 },
  sethostname: { x86_64: 170, aarch64: 161 },
  setdomainname: { x86_64: 171, aarch64: 162 },
  // Opening a file by handle reaches any inode of a mounted file system, past the binds.
  name_to_handle_at: { x86_64: 303, aarch64: 264 },
  open_by_handle_at: { x86_64: 304, aarch64: 265 },
};

/** System calls whose arguments are checked. */
const checked = {
  clone: { x86_64: 56, aarch64: 220 },
  clone3: { x86_64: 435, aarch64: 435 },
  ioctl: { x86_64: 16, aarch64: 29 },
} as const;

/** The names of every refused system call (for docs and tests). */
export const refusedSyscalls: readonly string[] = [...Object.keys(refused), "clone3"];

/** clone's CLONE_NEW* flags (CLONE_NEWTIME is only valid for unshare and clone3). */
const cloneNewFlags =
  0x00020000 | // CLONE_NEWNS
  0x02000000 | // CLONE_NEWCGROUP
  0x04000000 | // CLONE_NEWUTS
  0x08000000 | // CLONE_NEWIPC
  0x10000000 | // CLONE_NEWUSER
  0x20000000 | // CLONE_NEWPID
  0x40000000; // CLONE_NEWNET

const tiocsti = 0x5412;
const tioclinux = 0x541c;
const x32Bit = 0x40000000;

const retAllow = 0x7fff0000;
const retKillProcess = 0x80000000;
const retErrno = (errno: number) => 0x00050000 | errno;
const eperm = 1;
const enosys = 38;

// struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian on
// both architectures, so an argument's low 32 bits are at its offset).
const offsetNr = 0;
const offsetArch = 4;
const offsetArg = (i: number) => 16 + 8 * i;

type Instruction =
  | { readonly op: "load"; readonly offset: number }
  | { readonly op: "return"; readonly value: number }
  /** Jumps to `label` when the accumulator matches `value`, else falls through. */
  | {
      readonly op: "jeq" | "jge" | "jset";
      readonly value: number;
      readonly label: string;
    }
  | { readonly op: "label"; readonly name: string };

function archProgram(arch: SeccompArch): Instruction[] {
  const p: Instruction[] = [];
  const prefix = `${arch}-`;
  p.push({ op: "load", offset: offsetNr });
  if (arch === "x86_64") p.push({ op: "jge", value: x32Bit, label: `${prefix}eperm` });
  p.push({ op: "jeq", value: checked.clone[arch], label: `${prefix}clone` });
  p.push({ op: "jeq", value: checked.clone3[arch], label: `${prefix}enosys` });
  p.push({ op: "jeq", value: checked.ioctl[arch], label: `${prefix}ioctl` });
  for (const numbers of Object.values(refused)) {
    const nr = numbers[arch];
    if (nr !== undefined) p.push({ op: "jeq", value: nr, label: `${prefix}eperm` });
  }
  p.push({ op: "return", value: retAllow });
  // clone: the flags are its first argument; the kernel reads only their low 32 bits.
  p.push({ op: "label", name: `${prefix}clone` });
  p.push({ op: "load", offset: offsetArg(0) });
  p.push({ op: "jset", value: cloneNewFlags, label: `${prefix}eperm` });
  p.push({ op: "return", value: retAllow });
  // ioctl: the request is an unsigned int, its low 32 bits (a high word is ignored by the kernel).
  p.push({ op: "label", name: `${prefix}ioctl` });
  p.push({ op: "load", offset: offsetArg(1) });
  p.push({ op: "jeq", value: tiocsti, label: `${prefix}eperm` });
  p.push({ op: "jeq", value: tioclinux, label: `${prefix}eperm` });
  p.push({ op: "return", value: retAllow });
  p.push({ op: "label", name: `${prefix}enosys` });
  p.push({ op: "return", value: retErrno(enosys) });
  p.push({ op: "label", name: `${prefix}eperm` });
  p.push({ op: "return", value: retErrno(eperm) });
  return p;
}

function program(): Instruction[] {
  return [
    { op: "load", offset: offsetArch },
    { op: "jeq", value: auditArch.x86_64, label: "x86_64" },
    { op: "jeq", value: auditArch.aarch64, label: "aarch64" },
    { op: "return", value: retKillProcess },
    { op: "label", name: "x86_64" },
    ...archProgram("x86_64"),
    { op: "label", name: "aarch64" },
    ...archProgram("aarch64"),
  ];
}

// BPF opcodes: BPF_LD|BPF_W|BPF_ABS, BPF_RET|BPF_K, BPF_JMP|BPF_{JEQ,JGE,JSET}|BPF_K.
const opcodes = { load: 0x20, return: 0x06, jeq: 0x15, jge: 0x35, jset: 0x45 } as const;

/** Assembles the program into struct sock_filter entries (8 bytes each, little-endian). */
function assemble(instructions: readonly Instruction[]): Buffer {
  const code = instructions.filter(
    (i): i is Exclude<Instruction, { op: "label" }> => i.op !== "label",
  );
  const labels = new Map<string, number>();
  let at = 0;
  for (const instruction of instructions) {
    if (instruction.op === "label") labels.set(instruction.name, at);
    else at += 1;
  }
  const out = Buffer.alloc(code.length * 8);
  code.forEach((instruction, index) => {
    const base = index * 8;
    let jt = 0;
    let k = 0;
    switch (instruction.op) {
      case "load":
        k = instruction.offset;
        break;
      case "return":
        k = instruction.value;
        break;
      case "jeq":
      case "jge":
      case "jset": {
        const target = labels.get(instruction.label);
        if (target === undefined) throw new Error(`seccomp: no label ${instruction.label}`);
        jt = target - index - 1;
        // Conditional jumps go forward by at most 255 instructions.
        if (jt < 0 || jt > 255) throw new Error(`seccomp: jump to ${instruction.label} too far`);
        k = instruction.value;
        break;
      }
    }
    out.writeUInt16LE(opcodes[instruction.op], base);
    out.writeUInt8(jt, base + 2);
    out.writeUInt8(0, base + 3);
    out.writeUInt32LE(k >>> 0, base + 4);
  });
  return out;
}

/** The filter as bwrap's `--seccomp FD` reads it: an array of struct sock_filter. */
export function buildSeccompFilter(): Buffer {
  return assemble(program());
}

/** The machine's architecture when the filter knows it. */
export function seccompArch(): SeccompArch | undefined {
  const arch = os.arch();
  return arch === "x64" ? "x86_64" : arch === "arm64" ? "aarch64" : undefined;
}

/**
 * Writes the filter once for this process: a file no one can change (0444 in a 0755 directory
 * of this process's user), which the sandbox's launcher opens on fd 3 for bwrap.
 */
export function writeSeccompFilter(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "peergate-seccomp-"));
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, "filter.bpf");
  writeFileSync(file, buildSeccompFilter(), { mode: 0o444 });
  chmodSync(file, 0o444);
  chmodSync(dir, 0o755);
  return file;
}
