// Skills and custom slash commands through the official TypeScript SDK: listed in
// system/init, a command expanded before the model sees it, a skill's body sent when loaded.
// Run by run.sh (every *.test.mjs here) after the SDK is installed under target/sdk-node.

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { existsSync, mkdtempSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, "..", "..");
const KEEL = process.env.KEEL_BIN ?? join(REPO, "target", "debug", "keel");
const KEEL_MOCK = process.env.KEEL_MOCK_BIN ?? join(REPO, "target", "debug", "keel-mock");
const NODE_DIR = process.env.KEEL_SDK_NODE_DIR ?? join(REPO, "target", "sdk-node");
const SDK = join(NODE_DIR, "node_modules", "@anthropic-ai", "claude-agent-sdk", "sdk.mjs");
const { query } = await import(pathToFileURL(SDK).href);

async function start(t, scenario) {
  const tmp = mkdtempSync(join(tmpdir(), "keel-ts-ext-"));
  const cwd = join(tmp, "work");
  mkdirSync(cwd);
  mkdirSync(join(tmp, "home"));
  const log = join(tmp, "mock.jsonl");
  const mock = spawn(KEEL_MOCK, ["--scenario", join(HERE, "scenarios", `${scenario}.json`), "--port", "0", "--log", log], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  t.after(() => mock.kill("SIGTERM"));
  const url = await new Promise((ok, fail) => {
    const rl = createInterface({ input: mock.stdout });
    rl.once("line", (l) => ok(l.trim()));
    mock.once("exit", (c) => fail(new Error(`keel-mock exited ${c}`)));
  });
  const options = (extra = {}) => ({
    pathToClaudeCodeExecutable: KEEL,
    cwd,
    env: {
      ...process.env,
      ANTHROPIC_BASE_URL: url,
      ANTHROPIC_API_KEY: "sk-test-keel",
      HOME: join(tmp, "home"),
      KEEL_HOME: join(tmp, "keel-home"),
      IS_SANDBOX: "1",
    },
    ...extra,
  });
  const requests = () =>
    existsSync(log)
      ? readFileSync(log, "utf8")
          .split("\n")
          .filter((l) => l.trim())
          .map((l) => JSON.parse(l))
          .filter((r) => r.path.startsWith("/v1/messages") && !r.path.includes("count_tokens"))
      : [];
  return { cwd, options, requests };
}

async function collect(q) {
  const out = [];
  for await (const m of q) out.push(m);
  return out;
}

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
