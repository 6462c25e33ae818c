// Hook callbacks registered through the official TypeScript SDK for several events: keel asks
// the host (`hook_callback`) for each and applies its answers. Run by run.sh beside
// ts_sdk.test.mjs.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { start as startIn, sdk, channel, untilResult } from "./harness.mjs";

const { query } = sdk;
const start = (t, scenario) => startIn(t, scenario, "keel-ts-hooks-");

test("hook callbacks for many events", { timeout: 90_000 }, async (t) => {
  const env = await start(t, "hook_events");
  const seen = [];
  const record = (answer) => async (input) => {
    seen.push(input);
    return typeof answer === "function" ? answer(input) : answer;
  };
  const input = channel("Read the file, then create asked.txt.");
  const q = query({
    prompt: input.stream,
    options: env.options({
      hooks: {
        UserPromptSubmit: [{ hooks: [record({ hookSpecificOutput: { hookEventName: "UserPromptSubmit", additionalContext: "context from the TS host" } })] }],
        PostToolUseFailure: [{ matcher: "Read|Grep", hooks: [record({ hookSpecificOutput: { hookEventName: "PostToolUseFailure", additionalContext: "the TS host saw the failure" } })] }],
        PermissionRequest: [{ matcher: "^Bash$", hooks: [record({ hookSpecificOutput: { hookEventName: "PermissionRequest", decision: { behavior: "allow" } } })] }],
        Stop: [{ hooks: [record((i) => (i.stop_hook_active ? {} : { decision: "block", reason: "look at it once more" }))] }],
      },
    }),
  });
  const messages = await untilResult(q);
  input.close();
  assert.deepEqual(
    seen.map((i) => i.hook_event_name),
    ["UserPromptSubmit", "PostToolUseFailure", "PermissionRequest", "Stop", "Stop"],
  );
  assert.equal(seen[1].tool_name, "Read");
  assert.ok(seen[1].error, "PostToolUseFailure carries the error");
  assert.deepEqual(seen.slice(3).map((i) => i.stop_hook_active), [false, true]);
  assert.ok(existsSync(join(env.cwd, "asked.txt")), "the host's PermissionRequest answer allowed the call");
  const requests = env.requests();
  assert.equal(requests.length, 4);
  assert.match(JSON.stringify(requests[0].body.messages), /context from the TS host/);
  assert.match(JSON.stringify(requests[3].body.messages), /look at it once more/);
  const result = messages.at(-1);
  assert.equal(result.subtype, "success");
  assert.equal(result.is_error, false);
});
