// Test only: reads {"secret", "deliveries": [{"headers", "body"}]} on stdin and prints one line of
// JSON per delivery: {"id", "ok", "type", "workflow_id", "error"}, as the Standard Webhooks
// reference library verifies it (signature, and a timestamp within its tolerance).
import { Webhook } from "standardwebhooks";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const { secret, deliveries } = JSON.parse(input);
const wh = new Webhook(secret);
for (const d of deliveries) {
  try {
    const payload = wh.verify(d.body, d.headers);
    console.log(JSON.stringify({ id: d.headers["webhook-id"], ok: true, type: payload.type, workflow_id: payload.data.workflow_id }));
  } catch (e) {
    console.log(JSON.stringify({ id: d.headers["webhook-id"], ok: false, error: String(e) }));
  }
}
