// Skills and custom slash commands through the official TypeScript SDK: listed in
// system/init, a command expanded before the model sees it, a skill's body sent when loaded.
// Run by run.sh (every *.test.mjs here) after the SDK is installed under target/sdk-node.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { start as startIn, collect, sdk } from "./harness.mjs";

const { query } = sdk;
const start = (t, scenario) => startIn(t, scenario, "keel-ts-ext-");

/** Every text a recorded request's messages carry (tool results included). */
function sentTexts(request) {
  const out = [];
  for (const m of request.body.messages) {
    if (typeof m.content === "string") {
      out.push(m.content);
      continue;
    }
    for (const b of m.content) {
      if (typeof b.text === "string") out.push(b.text);
      if (typeof b.content === "string") out.push(b.content);
      if (Array.isArray(b.content)) for (const p of b.content) if (p.text) out.push(p.text);
    }
  }
  return out;
}

function initOf(messages) {
  const init = messages.find((m) => m.type === "system" && m.subtype === "init");
  assert.ok(init && "keel_version" in init, "system/init came from keel");
  return init;
}

test("a custom command is listed in init and expanded before the model sees it", { timeout: 90_000 }, async (t) => {
  const env = await start(t, "command_text");
  mkdirSync(join(env.cwd, ".claude", "commands"), { recursive: true });
  writeFileSync(join(env.cwd, ".claude", "commands", "greet.md"), "---\ndescription: Greet someone\n---\nGreet $ARGUMENTS warmly.\n");
  const q = query({ prompt: "/greet Bob", options: env.options() });
  const commands = await q.supportedCommands();
  const greet = commands.find((c) => c.name === "greet");
  assert.equal(greet?.description, "Greet someone", JSON.stringify(commands));
  const messages = await collect(q);
  const init = initOf(messages);
  assert.ok(init.slash_commands.includes("greet"), JSON.stringify(init.slash_commands));
  assert.equal(messages.at(-1).subtype, "success");
  const sent = sentTexts(env.requests()[0]);
  assert.ok(sent.includes("Greet Bob warmly."), JSON.stringify(sent));
  assert.ok(!sent.includes("/greet Bob"), JSON.stringify(sent));
});

test("a skill is listed in init and its body reaches the model when loaded", { timeout: 90_000 }, async (t) => {
  const env = await start(t, "skill_load");
  const dir = join(env.cwd, ".claude", "skills", "changelog");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "SKILL.md"), "---\nname: changelog\ndescription: Write the changelog for a release\n---\nList every change since $ARGUMENTS.\n");
  const messages = await collect(query({ prompt: "Write the changelog.", options: env.options({ maxTurns: 4 }) }));
  const init = initOf(messages);
  assert.deepEqual(init.skills, ["changelog"]);
  assert.equal(messages.at(-1).subtype, "success");
  const [first, second] = env.requests();
  const skillTool = first.body.tools.find((x) => x.name === "Skill");
  assert.ok(skillTool.description.includes("- changelog: Write the changelog for a release"));
  assert.ok(!JSON.stringify(first.body).includes("List every change"), "no body before use");
  assert.ok(sentTexts(second).some((s) => s.includes("List every change since v2.0.")));
});
