// ask_user_question: a descriptor only. It needs a person at the keyboard, so it is withheld from
// caller runs and has no implementation here; the ceiling still reasons about it by name.
import { defineBuiltin } from "../builtin.ts";

export const askUserQuestionTool = defineBuiltin({
  name: "ask_user_question",
  category: "context",
  description: "Ask the person at the keyboard a question.",
  risk: "read-only",
  disclosure: "private",
  egress: false,
  needsPerson: true,
});
