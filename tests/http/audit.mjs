// Runs the GraphQL over HTTP audits of the npm package graphql-http against a server and
// prints one JSON document: {url, counts, results: [{id, name, status, reason?, response?}]}.
// Status per audit: ok; notice = a MAY not done; warn = a SHOULD failed; error = a MUST
// failed; fatal = the audit could not run (e.g. connection refused).
// Usage: node audit.mjs <graphql url> <directory holding node_modules/graphql-http>
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [url, packages] = process.argv.slice(2);
if (!url || !packages) {
  console.error('usage: node audit.mjs <url> <npm prefix with graphql-http installed>');
  process.exit(2);
}
const entry = join(packages, 'node_modules', 'graphql-http', 'lib', 'index.mjs');
const { serverAudits } = await import(pathToFileURL(entry).href);

const results = [];
for (const audit of serverAudits({ url, fetchFn: fetch })) {
  let result;
  try {
    result = await audit.fn();
  } catch (err) {
    results.push({ id: audit.id, name: audit.name, status: 'fatal', reason: String(err?.cause ?? err) });
    continue;
  }
  const out = { id: result.id, name: result.name, status: result.status };
  if (result.status !== 'ok') {
    out.reason = result.reason;
    const res = result.response;
    let body;
    try {
      body = res.bodyUsed ? '<body already read>' : (await res.text()).slice(0, 500);
    } catch (err) {
      body = `<unreadable: ${err}>`;
    }
    out.response = { status: res.status, contentType: res.headers.get('content-type'), body };
  }
  results.push(out);
}
const counts = {};
for (const r of results) counts[r.status] = (counts[r.status] ?? 0) + 1;
console.log(JSON.stringify({ url, counts, results }));
