// The parts runs.ts, interpreters.ts and command-options.ts build their answers from: a word as
// the reader saw it, what a command runs (an argv, bash text, or code that cannot be read), and
// their constructors. A bash script built from an expansion cannot be read: it is only known
// when it runs. Pure.
import type { ExpansionKind } from "./syntax.ts";

/** A word as the reader saw it: its text after quote removal and the expansions in it. */
export type Word = { readonly text: string; readonly expansions: readonly ExpansionKind[] };

export type Run =
  /** An argv it runs (a wrapper's command, `find -exec`'s, `xargs`'). */
  | { readonly kind: "command"; readonly words: readonly Word[]; readonly via: string }
  /** Bash text it runs (a shell's `-c` script, `eval`'s words, a pager setting). */
  | { readonly kind: "script"; readonly text: string; readonly via: string }
  /** Code it runs that the reader cannot read; `inline`: code written in the argv itself. */
  | {
      readonly kind: "opaque";
      readonly reason: string;
      readonly via: string;
      readonly inline: boolean;
    };

export const literal = (text: string): Word => ({ text, expansions: [] });

export function script(words: readonly Word[], via: string): Run {
  const built = words.find((w) => w.expansions.length > 0);
  if (built !== undefined) {
    return opaque(
      via,
      `its code is built from an expansion (${short(built.text)}), which is only known when it runs`,
      true,
    );
  }
  return { kind: "script", text: words.map((w) => w.text).join(" "), via };
}

export function opaque(via: string, reason: string, inline: boolean): Run {
  return { kind: "opaque", via, reason, inline };
}

export function command(words: readonly Word[], via: string): Run[] {
  return words.length === 0 ? [] : [{ kind: "command", words, via }];
}

export function short(text: string): string {
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}
