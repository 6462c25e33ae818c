// `/clear` through the official TypeScript SDK: no model request for it, the
// `conversation_reset` message under the old session id, a new session id from there on, the
// next turn on a fresh conversation (checked on what keel-mock received), and the host's
// SessionStart hook called with source `clear`. Run by run.sh beside ts_sdk.test.mjs.

import { test } from "node:test";
import assert from "node:assert/strict";
import { start as startIn, sdk, channel, untilResult } from "./harness.mjs";

const { query } = sdk;

test("/clear resets the conversation under a new session id", { timeout: 90_000 }, async (t) => {
  const env = await startIn(t, "clear", "keel-ts-clear-");
  const starts = [];
  const input = channel("FIRST-PROMPT");
  const q = query({
    prompt: input.stream,
    options: env.options({
      hooks: {
        SessionStart: [{
          hooks: [async (i) => {
            starts.push(i);
            return i.source === "clear"
              ? { hookSpecificOutput: { hookEventName: "SessionStart", additionalContext: "CLEAR-CONTEXT" } }
              : {};
          }],
        }],
      },
    }),
  });
  const first = await untilResult(q);
  const old = first.at(-1).session_id;
  input.send("/clear");
  const cleared = await untilResult(q);
  input.send("SECOND-PROMPT");
  const second = await untilResult(q);
  input.close();
  for await (const _ of q) {
    // drain to the end of the run
  }

  const resets = cleared.filter((m) => m.type === "conversation_reset");
  assert.equal(resets.length, 1, JSON.stringify(cleared.map((m) => m.type)));
  assert.equal(resets[0].session_id, old);
  const result = cleared.at(-1);
  assert.equal(result.subtype, "success");
  assert.equal(result.num_turns, 0);
  const fresh = result.session_id;
  assert.notEqual(fresh, old);
  assert.equal(resets[0].new_conversation_id, fresh);
  const init = cleared.find((m) => m.type === "system" && m.subtype === "init");
  assert.equal(init.session_id, fresh);
  assert.equal(second.at(-1).session_id, fresh);

  const requests = env.requests();
  assert.equal(requests.length, 2, "no model request for /clear");
  const sent = JSON.stringify(requests[1].body.messages);
  assert.match(sent, /SECOND-PROMPT/);
  assert.match(sent, /CLEAR-CONTEXT/);
  assert.doesNotMatch(sent, /FIRST-PROMPT|ANSWER-ONE/);
  assert.equal(starts.at(-1).source, "clear");
  assert.equal(starts.at(-1).session_id, fresh);
});
