-- What the wrk scripts (wrk_checked.lua, wrk_pairs.lua, wrk_post.lua) share: the bodies of a
-- file POSTed in turn (`load_bodies` in their init, `request`), the threads (`setup`), and
-- done(), which sums the threads' `bad`, `wrong` and `checked` counts and prints one line
-- "BENCHJSON {...}" with them and the run's figures (latencies in microseconds), which
-- tests.bench.checked_load parses.

bodies = {}
index = 0 -- the body sent last; a script's init sets where its thread starts
threads = {}

function load_bodies(path)
  for line in io.lines(path) do
    if #line > 0 then
      table.insert(bodies, line)
    end
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function setup(thread)
  table.insert(threads, thread)
end

function request()
  index = index % #bodies + 1
  return wrk.format(nil, nil, nil, bodies[index])
end

function done(summary, latency, requests)
  local sums = { bad = 0, wrong = 0, checked = 0 }
  for _, thread in ipairs(threads) do
    for name, _ in pairs(sums) do
      sums[name] = sums[name] + (thread:get(name) or 0)
    end
  end
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"requests":%d,"duration_us":%d,"socket_errors":%d,"non_2xx":%d,' ..
    '"bad_responses":%d,"wrong_answers":%d,"checked":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"mean_us":%.1f,"max_us":%d}\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout,
    e.status, sums.bad, sums.wrong, sums.checked,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.mean, latency.max))
end
