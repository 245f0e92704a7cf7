// Two MCP sessions, lead and reader, through the plan protocol against a
// running Mailroom: reader submits a plan and waits for mail, lead approves
// it, reader's check_replies says approved. Run by e2e/mcp_test.go with
// MAILROOM_URL, LEAD_TOKEN and READER_TOKEN; exits non-zero on any failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const base = process.env.MAILROOM_URL;
const tokens = { lead: process.env.LEAD_TOKEN, reader: process.env.READER_TOKEN };

function check(ok, what, got) {
  if (!ok) {
    throw new Error(`${what}: got ${JSON.stringify(got)}`);
  }
}

async function connect(member) {
  const client = new Client({ name: `e2e-${member}`, version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL("/mcp", base), {
    requestInit: { headers: { Authorization: `Bearer ${tokens[member]}` } },
  });
  await client.connect(transport);
  return client;
}

async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  check(!res.isError, `${name} refused`, res);
  check(res.structuredContent !== undefined, `${name} has structured content`, res);
  check(res.content.some((c) => c.type === "text" && c.text.length > 0), `${name} has a short text`, res);
  return res.structuredContent;
}

const lead = await connect("lead");
const reader = await connect("reader");
try {
  const leadTools = (await lead.listTools()).tools.map((t) => t.name);
  const readerTools = (await reader.listTools()).tools.map((t) => t.name);
  check(!leadTools.includes("submit_plan") && leadTools.includes("request_shutdown"), "lead's tools", leadTools);
  check(readerTools.includes("submit_plan") && !readerTools.includes("request_shutdown"), "reader's tools", readerTools);

  const plan = await call(reader, "submit_plan", { plan: "Read the source and report the expected value." });
  check(plan.request_id === "req-1" && plan.status === "pending", "submit_plan", plan);

  // Reader sleeps until a letter arrives; lead answers meanwhile.
  const waiting = call(reader, "wait_for_mail", { timeout_seconds: 60 });

  const leadInbox = await call(lead, "read_inbox", {});
  check(leadInbox.messages.length === 1 && leadInbox.messages[0].sender === "reader", "lead's inbox", leadInbox);
  const reply = await call(lead, "reply_request", { request_id: plan.request_id, approve: true, feedback: "Go ahead." });
  check(reply.status === "queued", "reply_request", reply);

  const mail = await waiting;
  check(mail.messages.length === 1 && mail.messages[0].sender === "lead", "wait_for_mail", mail);

  const replies = await call(reader, "check_replies", {});
  const approved = replies.results.find((r) => r.request_id === plan.request_id);
  check(approved && approved.status === "approved", "check_replies", replies);

  // A refusal is an error result with the REST error word.
  const refused = await lead.callTool({ name: "send_message", arguments: { to: "nobody", body: "hi" } });
  check(refused.isError && refused.structuredContent?.code === "unknown_member", "refusal", refused);

  console.log(JSON.stringify({ ok: true, request: plan.request_id, verdict: approved.status }));
} finally {
  await lead.close();
  await reader.close();
}
