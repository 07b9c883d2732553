-- wrk script of the statefed benchmark: POSTs the JSON bodies of a file (one per line,
-- argument 1) in turn, counts responses that are not 200 or carry GraphQL "errors", and
-- prints one line "BENCHJSON {...}" with the figures (latencies in microseconds).

-- bodies, index, threads, load_bodies, setup and request: shared with the checking scripts
-- (this script's done() below reports without their checks)
dofile(string.match(debug.getinfo(1, "S").source, "^@(.*/)") .. "wrk_common.lua")

bad = 0

function init(args)
  load_bodies(args[1])
  index = math.random(#bodies) - 1 -- threads start at different bodies
end

function response(status, headers, body)
  if status ~= 200 or string.find(body, '"errors"', 1, true) then
    bad = bad + 1
  end
end

function done(summary, latency, requests)
  local graphql_errors = 0
  for _, thread in ipairs(threads) do
    graphql_errors = graphql_errors + (thread:get("bad") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"requests":%d,"duration_us":%d,"socket_errors":%d,"bad_responses":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"mean_us":%.1f,"max_us":%d}\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout,
    graphql_errors, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.mean, latency.max))
end
